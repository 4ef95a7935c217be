package manager

import (
	"strings"
	"testing"
)

// TestStateEncryptionOptions: off needs nothing; on needs the manager's namespace, derives the
// endpoint of the Service config/manager installs, and refuses an endpoint runners could not use.
func TestStateEncryptionOptions(t *testing.T) {
	on := func(ns, addr, url string) StateEncryptionOptions {
		return StateEncryptionOptions{Enabled: true, Namespace: ns, Secret: DefaultStateEncryptionSecret, Address: addr, URL: url}
	}
	for _, tc := range []struct {
		name string
		o    StateEncryptionOptions
		url  string // the endpoint, when valid
		err  string
	}{
		{name: "off", o: StateEncryptionOptions{}},
		{name: "default endpoint", o: on("capx-system", ":9443", ""), url: "https://capx-state-key.capx-system.svc:9443/v1/state-key"},
		{name: "given endpoint", o: on("capx-system", "127.0.0.1:7000", "https://127.0.0.1:7000/v1/state-key"), url: "https://127.0.0.1:7000/v1/state-key"},
		{name: "no namespace", o: on("", ":9443", ""), err: "needs --state-encryption-namespace"},
		{name: "plain http", o: on("ns", ":9443", "http://key.example/v1/state-key"), err: "want https://host[:port]/v1/state-key"},
		{name: "other path", o: on("ns", ":9443", "https://key.example/keys"), err: "want https://host[:port]/v1/state-key"},
		{name: "address without port", o: on("ns", "localhost", ""), err: "--state-key-address"},
		{name: "no Secret name", o: StateEncryptionOptions{Enabled: true, Namespace: "ns", Address: ":9443"}, err: "--state-encryption-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.validate()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.url == "" {
				return
			}
			u, err := tc.o.endpoint()
			if err != nil || u.String() != tc.url {
				t.Fatalf("endpoint %v, %v; want %s", u, err, tc.url)
			}
		})
	}
}
