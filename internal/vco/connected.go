package vco

import "context"

// Connected cloudspaces are VPN links between cloudspaces, across locations: CAPVCO's geo
// mesh. One create links both ends. Deletes can fail with 400/500 on the platform; callers
// tearing down should tolerate that, since the cloudspace delete removes links anyway.

const (
	pathConnected  = pathCloudspace + "/connected-cloudspaces"
	pathConnection = pathConnected + "/{connected_cloudspace_id}"
)

var (
	opListConnected    = get("ListConnectedCloudspaces", pathConnected)
	opConnect          = post("ConnectCloudspaces", pathConnected)
	opConnectionStatus = get("ConnectionStatus", pathConnection)
	opDisconnect       = del("DisconnectCloudspaces", pathConnection)
)

// Connection statuses.
const (
	ConnectionUnknown   = "UNKNOWN"
	ConnectionConnected = "CONNECTED"
)

// ConnectedCloudspace is the far end of a link.
type ConnectedCloudspace struct {
	CloudspaceID         string `json:"cloudspace_id"`
	Name                 string `json:"name"`
	Location             string `json:"location"`
	LocalPublicAddress   string `json:"local_public_address"`
	RemotePublicAddress  string `json:"remote_public_address"`
	RemotePrivateNetwork string `json:"remote_private_network"`
}

// ListConnectedCloudspaces lists the cloudspaces linked to one.
func (c *Client) ListConnectedCloudspaces(ctx context.Context, cloudspaceID string) ([]ConnectedCloudspace, error) {
	var out resultList[ConnectedCloudspace]
	err := c.do(ctx, opListConnected, call{path: args(cloudspaceID)}, &out)
	return out.Result, err
}

// ConnectCloudspaces links two cloudspaces by their public IPs; ErrConflict when linked.
func (c *Client) ConnectCloudspaces(ctx context.Context, cloudspaceID, otherID, localIP, remoteIP string) error {
	q := query{}.str("connected_cloudspace_id", otherID).str("remote_cloudspace_ip", remoteIP).str("local_cloudspace_ip", localIP)
	return c.do(ctx, opConnect, call{path: args(cloudspaceID), query: q.values()}, nil)
}

// ConnectionStatus is UNKNOWN until the tunnel is up, then CONNECTED.
func (c *Client) ConnectionStatus(ctx context.Context, cloudspaceID, otherID string) (string, error) {
	var out struct {
		Status string `json:"status"`
	}
	err := c.do(ctx, opConnectionStatus, call{path: args(cloudspaceID, otherID)}, &out)
	return out.Status, err
}

// DisconnectCloudspaces removes a link; success when there was none.
func (c *Client) DisconnectCloudspaces(ctx context.Context, cloudspaceID, otherID, localIP, remoteIP string) error {
	q := query{}.str("remote_cloudspace_ip", remoteIP).str("local_cloudspace_ip", localIP)
	return c.do(ctx, opDisconnect, call{path: args(cloudspaceID, otherID), query: q.values()}, nil)
}
