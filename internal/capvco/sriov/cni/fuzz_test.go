package cni

import "testing"

// FuzzParseConf: the configuration the runtime passes is parsed or refused, never a panic, and
// an accepted one always names a network and has its defaults.
func FuzzParseConf(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","type":"capvco-sriov","networkID":1,"prefixLength":24}`))
	f.Add([]byte(`{"networkID":-3,"prefixLength":300}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConf(b)
		if err != nil {
			return
		}
		if c.NetworkID == 0 || c.AgentSocket == "" || c.LinkTimeoutSeconds <= 0 || c.PrefixLength < 0 || c.PrefixLength > 128 {
			t.Fatalf("accepted %+v", c)
		}
	})
}
