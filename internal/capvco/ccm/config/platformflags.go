package config

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/capx-io/capx/internal/vco"
)

// PlatformFlags are the endpoint-policy flags of the add-on commands that take their settings
// as flags rather than a file (capvco-external-dns-webhook, capvco-sriov-agent); the manager
// passes its own --vco-allow-http and --vco-allowed-hosts on as these.
var PlatformFlags = vco.PolicyFlags{AllowHTTP: "--allow-http", AllowedHosts: "--allowed-hosts"}

// BindPlatformFlags adds PlatformFlags to fs, writing into p.
func BindPlatformFlags(fs *pflag.FlagSet, p *Platform) {
	fs.BoolVar(&p.AllowHTTP, PlatformFlags.AllowHTTP[2:], false, "send the credential over plain http to any host (a whitesky.cloud simulator); loopback hosts never need it. Never for whitesky.cloud")
	fs.StringSliceVar(&p.AllowedHosts, PlatformFlags.AllowedHosts[2:], nil, "the only hosts (host or host:port) the credential's url and iamURL may name (repeatable); empty: any public host")
}

// FlagClientOptions are p's client options, with refusals naming PlatformFlags; an allowed host
// that is not a host or host:port is an error naming --allowed-hosts.
func FlagClientOptions(p Platform) (vco.Options, error) {
	hosts, err := vco.ParseAllowedHosts(PlatformFlags.AllowedHosts, p.AllowedHosts)
	if err != nil {
		return vco.Options{}, err
	}
	return vco.Options{AllowHTTP: p.AllowHTTP, AllowedHosts: hosts, Flags: PlatformFlags}, nil
}

// PlatformArgs are p as PlatformFlags arguments, for the manifests of those add-ons: the
// manager's own policy passed on. Hosts are written in canonical form and must be plain
// (letters, digits, '.', '-', ':', '[', ']'), as each lands in a YAML argument list.
func PlatformArgs(p Platform) ([]string, error) {
	hosts, err := vco.ParseAllowedHosts(PlatformFlags.AllowedHosts, p.AllowedHosts)
	if err != nil {
		return nil, err
	}
	var args []string
	if p.AllowHTTP {
		args = append(args, PlatformFlags.AllowHTTP)
	}
	for _, h := range hosts {
		if strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789.-:[]") != "" {
			return nil, fmt.Errorf("%s entry %q: only letters, digits, '.', '-', ':' and brackets can be passed on", PlatformFlags.AllowedHosts, h)
		}
		args = append(args, PlatformFlags.AllowedHosts+"="+h)
	}
	return args, nil
}
