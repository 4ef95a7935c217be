// Package vco is the typed REST client for the whitesky.cloud (VCO) customer API, used by
// CAPVCO and capvco-gpucheck.
//
// *Client implements one small interface per API area (Cloudspaces, VMs, VGPUs, ...);
// callers depend on the narrowest one, or declare their own subset. The client maps errors
// to sentinels at the boundary (ErrNotFound, ErrForbidden, ErrConflict, ErrUnauthorized,
// ErrRateLimited, ErrServer, ErrUnavailable) and keeps the API's message, retries transient
// failures only where a call is idempotent, renews JWTs before they expire, limits calls in
// flight per credential and records one metric per call. The API blocks until work is
// done and has no idempotency key, so creates come in Ensure* form: look the deterministic
// name up first, create, and after an unknown outcome look it up again.
//
// Tokens, client secrets, request bodies (which carry cloud-init user data) and query strings
// (the API takes some secrets there, such as a VM's tpm_secret) never appear in logs or error
// strings. docs/vco-client.md is the user guide.
package vco
