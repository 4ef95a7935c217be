package outputs

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// errNull marks an output that is null in substance though not in form: an endpoint whose host
// and port are both empty.
var errNull = errors.New("null")

// healthStates is the closed set of health.state values.
var healthStates = []string{"pending", "running", "degraded", "stopped", "terminated", "unknown"}

func (r *Result) decodeHealth(v value) error {
	const want = "an object {state, healthy, message}"
	f, err := v.object("", want)
	if err != nil {
		return err
	}
	state, err := f["state"].string(".state", 32)
	if err != nil || !slices.Contains(healthStates, state) {
		return fmt.Errorf("at .state must be one of %s", strings.Join(healthStates, ", "))
	}
	healthy, err := f["healthy"].bool(".healthy")
	if err != nil {
		return err
	}
	var msg string
	if err := f["message"].optionalString(&msg, ".message", 1<<20); err != nil {
		return err
	}
	r.Health = &captfv1.Health{State: state, Healthy: healthy, Message: truncate(msg, maxHealthMessage)}
	return nil
}

// truncate shortens s to at most n bytes on a rune boundary: a long health message is
// informational, not a contract violation.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "..."
	s = s[:n-len(ellipsis)]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + ellipsis
}

func (r *Result) decodeEndpoint(v value) error {
	const want = "an object {host, port}"
	f, err := v.object("", want)
	if err != nil {
		return err
	}
	var host string
	if err := f["host"].optionalString(&host, ".host", 512); err != nil {
		return err
	}
	var port int32
	if p := f["port"]; p.kind != "" && !p.isNull() {
		if port, err = p.int32(".port"); err != nil {
			return err
		}
	}
	switch {
	case host == "" && port == 0:
		return errNull
	case host == "":
		return errors.New("sets port but not host; set both, or null until the endpoint is known")
	case port == 0:
		return errors.New("sets host but not port; set both, or null until the endpoint is known")
	case port > 65535:
		return errors.New("at .port must be a port number from 1 to 65535")
	}
	r.ControlPlaneEndpoint = &clusterv1.APIEndpoint{Host: host, Port: port}
	return nil
}

func (r *Result) decodeFailureDomains(v value) error {
	const want = "a list of {name, control_plane, attributes}"
	items, err := v.list("", want)
	if err != nil {
		return err
	}
	if len(items) > MaxFailureDomains {
		return fmt.Errorf("lists %d failure domains, more than the %d a cluster may have", len(items), MaxFailureDomains)
	}
	seen := map[string]bool{}
	fds := make([]clusterv1.FailureDomain, 0, len(items))
	for i, item := range items {
		path := fmt.Sprintf("[%d]", i)
		f, err := item.object(path, "an object {name, control_plane, attributes}")
		if err != nil {
			return err
		}
		name, err := f["name"].string(path+".name", maxName)
		if err != nil || name == "" {
			return fmt.Errorf("at %s.name must be a non-empty string of at most %d bytes", path, maxName)
		}
		if seen[name] {
			return fmt.Errorf("at %s.name repeats the name of an earlier failure domain", path)
		}
		seen[name] = true
		fd := clusterv1.FailureDomain{Name: name, ControlPlane: ptr.To(true)}
		if cp := f["control_plane"]; cp.kind != "" && !cp.isNull() {
			b, err := cp.bool(path + ".control_plane")
			if err != nil {
				return err
			}
			fd.ControlPlane = ptr.To(b)
		}
		if attrs := f["attributes"]; attrs.kind != "" && !attrs.isNull() {
			if fd.Attributes, err = stringMap(attrs, path+".attributes"); err != nil {
				return err
			}
		}
		fds = append(fds, fd)
	}
	r.FailureDomains = fds
	return nil
}

func stringMap(v value, path string) (map[string]string, error) {
	f, err := v.object(path, "a map of strings")
	if err != nil {
		return nil, err
	}
	if len(f) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(f))
	for k, item := range f {
		s, err := item.string(path, 1<<16)
		if err != nil {
			return nil, fmt.Errorf("at %s must be a map of strings", path)
		}
		out[k] = s
	}
	return out, nil
}

// addressOrder is CAPI's canonical preference: internal before external, IPs before names.
var addressOrder = []clusterv1.MachineAddressType{
	clusterv1.MachineInternalIP, clusterv1.MachineInternalDNS, clusterv1.MachineExternalIP,
	clusterv1.MachineExternalDNS, clusterv1.MachineHostName,
}

// decodeAddresses decodes a list of {type, address}, sorted canonically (type in addressOrder,
// then address) and without exact duplicates, so that a module's ordering never shows up as a
// change of status.
func decodeAddresses(v value, path string, limit int) ([]clusterv1.MachineAddress, error) {
	items, err := v.list(path, "a list of {type, address}")
	if err != nil {
		return nil, err
	}
	if len(items) > limit {
		return nil, fmt.Errorf("%slists %d addresses, more than %d", at(path), len(items), limit)
	}
	types := make([]string, len(addressOrder))
	for i, t := range addressOrder {
		types[i] = string(t)
	}
	out := make([]clusterv1.MachineAddress, 0, len(items))
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		f, err := item.object(p, "an object {type, address}")
		if err != nil {
			return nil, err
		}
		t, err := f["type"].string(p+".type", 32)
		if err != nil || !slices.Contains(types, t) {
			return nil, fmt.Errorf("at %s.type must be one of %s", p, strings.Join(types, ", "))
		}
		a, err := f["address"].string(p+".address", maxName)
		if err != nil || a == "" {
			return nil, fmt.Errorf("at %s.address must be a non-empty string of at most %d bytes", p, maxName)
		}
		out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(t), Address: a})
	}
	slices.SortFunc(out, func(a, b clusterv1.MachineAddress) int {
		return cmp.Or(cmp.Compare(slices.Index(addressOrder, a.Type), slices.Index(addressOrder, b.Type)), strings.Compare(a.Address, b.Address))
	})
	return slices.Compact(out), nil
}

func (r *Result) decodeProviderIDList(v value) error {
	items, err := v.list("", "a list of provider ID strings")
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(items))
	for i, item := range items {
		s, err := item.string(fmt.Sprintf("[%d]", i), maxProviderID)
		if err != nil || s == "" {
			return fmt.Errorf("at [%d] must be a non-empty string of at most %d bytes", i, maxProviderID)
		}
		ids = append(ids, s)
	}
	slices.Sort(ids)
	r.ProviderIDList = slices.Compact(ids)
	return nil
}

func (r *Result) decodeInstances(v value) error {
	items, err := v.list("", "a list of {provider_id, instance_id, addresses, failure_domain, state}")
	if err != nil {
		return err
	}
	all := make([]captfv1.MachinePoolInstance, 0, len(items))
	for i, item := range items {
		p := fmt.Sprintf("[%d]", i)
		f, err := item.object(p, "an object {provider_id, instance_id, addresses, failure_domain, state}")
		if err != nil {
			return err
		}
		var in captfv1.MachinePoolInstance
		for _, s := range []struct {
			key string
			dst *string
			max int
		}{
			{"provider_id", &in.ProviderID, maxProviderID},
			{"instance_id", &in.InstanceName, maxName},
			{"failure_domain", &in.FailureDomain, maxName},
			{"state", &in.State, maxInstanceState},
		} {
			if err := f[s.key].optionalString(s.dst, p+"."+s.key, s.max); err != nil {
				return err
			}
		}
		if a := f["addresses"]; a.kind != "" && !a.isNull() {
			if in.Addresses, err = decodeAddresses(a, p+".addresses", MaxInstanceAddresses); err != nil {
				return err
			}
		}
		all = append(all, in)
	}
	slices.SortStableFunc(all, func(a, b captfv1.MachinePoolInstance) int {
		return cmp.Or(strings.Compare(a.ProviderID, b.ProviderID), strings.Compare(a.InstanceName, b.InstanceName))
	})
	r.InstancesTotal = len(all)
	if len(all) > MaxInstances {
		all, r.InstancesTruncated = all[:MaxInstances:MaxInstances], true
	}
	r.Instances = all
	return nil
}
