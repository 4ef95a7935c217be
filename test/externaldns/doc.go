// Package externaldns is the ExternalDNS webhook provider's test with the real external-dns
// (-tags externaldns): see externaldns_test.go for how to build external-dns and run it.
package externaldns
