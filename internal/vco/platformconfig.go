package vco

// PlatformConfig is the endpoint policy as the add-ons' configuration files carry it (their
// `platform` block): the program's decision, never the credential's. The manager writes its own
// --vco-allow-http and --vco-allowed-hosts there when it delivers an add-on, so the add-on
// reaches the platform exactly as the manager does.
type PlatformConfig struct {
	// AllowHTTP permits plain http API and IAM URLs on any host: for a simulator only.
	// Loopback hosts never need it.
	AllowHTTP bool `json:"allowHTTP,omitempty"`
	// AllowedHosts, when not empty, are the only hosts (host or host:port) the credential's url
	// and iamURL may name; a link-local or metadata address must be listed to be used at all.
	AllowedHosts []string `json:"allowedHosts,omitempty"`
}

// ClientOptions are the client options of this policy; refusals name the file's fields.
func (p PlatformConfig) ClientOptions() Options {
	return Options{AllowHTTP: p.AllowHTTP, AllowedHosts: p.AllowedHosts,
		Flags: PolicyFlags{AllowHTTP: "platform.allowHTTP", AllowedHosts: "platform.allowedHosts"}}
}
