package vco

import "context"

var (
	opMe                  = get("Me", "/me")
	opListLocations       = get("ListLocations", "/locations")
	opGetCustomerLocation = get("GetCustomerLocation", "/customers/{customer_id}/locations/{location}")
)

// User is the identity behind the credential.
type User struct {
	Username  string         `json:"username"`
	IsAdmin   bool           `json:"is_admin"`
	IAMDomain string         `json:"iam_domain"`
	Customers []UserCustomer `json:"customers"`
	// AdminOf lists the customers this identity administers: only those may publish images
	// and write the certificate store.
	AdminOf []UserCustomer `json:"admin_of_customers"`
}

// UserCustomer is a customer the user belongs to.
type UserCustomer struct {
	ID   string `json:"customer_id"`
	Name string `json:"name"`
}

// Me reads the identity of the credential: a cheap way to check that it works.
func (c *Client) Me(ctx context.Context) (User, error) {
	var out User
	err := c.do(ctx, opMe, call{}, &out)
	return out, err
}

// Location is a site of the platform.
type Location struct {
	Name string `json:"name"`
}

// ListLocations lists every location of the platform.
func (c *Client) ListLocations(ctx context.Context) ([]Location, error) {
	var out resultList[Location]
	err := c.do(ctx, opListLocations, call{}, &out)
	return out.Result, err
}

// CheckLocation verifies that the customer (and the credential) may use a location:
// ErrForbidden ("Customer has no access to location") otherwise.
func (c *Client) CheckLocation(ctx context.Context, location string) error {
	return c.do(ctx, opGetCustomerLocation, call{path: args(location)}, nil)
}
