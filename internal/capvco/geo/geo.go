// Package geo meshes a cluster's sites with connected cloudspaces and un-meshes them at
// teardown. Link deletes on the platform can answer 400 or 500 while the VPN is torn down:
// they are retried a few times and then tolerated, because deleting the cloudspace removes its
// links anyway.
package geo

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/vco"
)

// API is what this package calls.
type API interface {
	vco.ConnectedCloudspaces
}

// Member is one site's cloudspace in the mesh.
type Member struct {
	Site, CloudspaceID, ExternalIP string
}

// Mesh is the state of the links.
type Mesh struct {
	// Links is how many links the mesh needs.
	Links int
	// Connecting names the links that exist but are not up yet ("a<->b").
	Connecting []string
}

// Connected reports whether every link is up.
func (m Mesh) Connected() bool { return len(m.Connecting) == 0 }

// Ensure links every pair of members and reports which links are not up yet.
func Ensure(ctx context.Context, api API, members []Member) (Mesh, error) {
	pairs := decide.MeshPairs(len(members))
	m := Mesh{Links: len(pairs)}
	linked := map[string]map[string]bool{}
	for _, p := range pairs {
		a, b := members[p[0]], members[p[1]]
		if linked[a.CloudspaceID] == nil {
			links, err := api.ListConnectedCloudspaces(ctx, a.CloudspaceID)
			if err != nil {
				return m, fmt.Errorf("list links of %s: %w", a.Site, err)
			}
			linked[a.CloudspaceID] = map[string]bool{}
			for _, l := range links {
				linked[a.CloudspaceID][l.CloudspaceID] = true
			}
		}
		name := a.Site + "<->" + b.Site
		if !linked[a.CloudspaceID][b.CloudspaceID] {
			err := api.ConnectCloudspaces(ctx, a.CloudspaceID, b.CloudspaceID, a.ExternalIP, b.ExternalIP)
			if err != nil && !errors.Is(err, vco.ErrConflict) {
				return m, fmt.Errorf("link %s: %w", name, err)
			}
			if err == nil {
				logr.FromContextOrDiscard(ctx).Info("Linked cloudspaces", "link", name, "cloudspaceID", a.CloudspaceID, "remoteCloudspaceID", b.CloudspaceID)
			}
		}
		status, err := api.ConnectionStatus(ctx, a.CloudspaceID, b.CloudspaceID)
		if err != nil {
			return m, fmt.Errorf("status of link %s: %w", name, err)
		}
		if status != vco.ConnectionConnected {
			m.Connecting = append(m.Connecting, name)
		}
	}
	return m, nil
}

// DeleteAttempts is how often one link delete is tried before it is tolerated.
const DeleteAttempts = 3

// Delete removes the links of every member. It returns the links whose deletes kept failing
// with 400/500 (tolerated: the cloudspace delete that follows removes them); any other error
// stops the teardown so that it is retried.
func Delete(ctx context.Context, api API, members []Member) (tolerated []string, err error) {
	log := logr.FromContextOrDiscard(ctx)
	for _, a := range members {
		links, err := api.ListConnectedCloudspaces(ctx, a.CloudspaceID)
		if errors.Is(err, vco.ErrNotFound) {
			continue
		}
		if err != nil {
			return tolerated, fmt.Errorf("list links of %s: %w", a.Site, err)
		}
		for _, l := range links {
			var derr error
			for range DeleteAttempts {
				derr = api.DisconnectCloudspaces(ctx, a.CloudspaceID, l.CloudspaceID, l.LocalPublicAddress, l.RemotePublicAddress)
				if derr == nil || errors.Is(derr, vco.ErrNotFound) {
					derr = nil
					break
				}
				if !errors.Is(derr, vco.ErrBadRequest) && !errors.Is(derr, vco.ErrServer) {
					return tolerated, fmt.Errorf("unlink %s from %s: %w", a.Site, l.Name, derr)
				}
			}
			link := fmt.Sprintf("%s<->%s", a.Site, l.Name)
			if derr != nil {
				log.Info("Leaving the link to the cloudspace delete: its delete kept failing", "link", link, "attempts", DeleteAttempts, "error", derr.Error())
				tolerated = append(tolerated, link)
				continue
			}
			log.Info("Unlinked cloudspaces", "link", link, "cloudspaceID", a.CloudspaceID, "remoteCloudspaceID", l.CloudspaceID)
		}
	}
	return tolerated, nil
}
