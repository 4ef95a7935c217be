// Package vcosim is a whitesky.cloud API simulator: the same routes, shapes and platform
// behaviour as the real customer API (held to its swagger by a conformance test), in memory
// with optional file persistence, with JWT auth and grant scoping, slow operations, fault
// injection and an inspection API. Tests embed it (NewTestServer); cmd/vcosim serves it.
package vcosim
