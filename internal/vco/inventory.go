package vco

import "context"

// Calls an inventory sweep (capvco-gpucheck) needs beyond what the provider uses: the
// customer's own locations, and a release that the platform refuses when the reservation got
// attached since it was read.

var opListCustomerLocations = get("ListCustomerLocations", "/customers/{customer_id}/locations")

// ListCustomerLocations lists the locations the customer has (not every location of the
// platform, as ListLocations does): the ones a sweep over "every location" must cover.
func (c *Client) ListCustomerLocations(ctx context.Context) ([]string, error) {
	var out struct {
		Locations []struct {
			Location string `json:"location"`
		} `json:"locations"`
	}
	if err := c.do(ctx, opListCustomerLocations, call{}, &out); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(out.Locations))
	for _, l := range out.Locations {
		names = append(names, l.Location)
	}
	return names, nil
}

// ReleaseUnattachedVGPU releases a reservation for good (permanently=true) only while it is
// unattached: it sends detach=false, so a reservation attached since the caller last read it
// answers ErrConflict instead of being detached from its VM and released.
func (c *Client) ReleaseUnattachedVGPU(ctx context.Context, location, vgpuID string) error {
	q := query{}.bool("detach", false).bool("permanently", true)
	return c.do(ctx, opReleaseVGPU, call{path: args(location, vgpuID), query: q.values()}, nil)
}
