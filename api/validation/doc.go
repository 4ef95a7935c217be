// Package validation holds the tests that prove, on a real API server, that every CRD installs
// and that its OpenAPI and CEL rules refuse bad input with a message an operator can act on.
package validation
