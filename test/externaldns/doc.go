// Package externaldns is the ExternalDNS webhook provider's test with the real external-dns
// (build tag e2e, run by make e2e): see externaldns_test.go for how to build external-dns and run it.
package externaldns
