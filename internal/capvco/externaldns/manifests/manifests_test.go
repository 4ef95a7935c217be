package manifests

import (
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/manifest"
)

var opts = Options{WebhookImage: "registry.example.com/capvco-external-dns-webhook:v1", CredentialsSecret: "capvco-external-dns-credentials",
	Cloudspaces: []string{"cs-1"}, OwnerID: "capvco-team-a-prod"}

// TestRenderRefuses: every value lands in an argument list, so what would split or break one is
// refused with the value named.
func TestRenderRefuses(t *testing.T) {
	for name, mutate := range map[string]func(*Options){
		"no webhook image": func(o *Options) { o.WebhookImage = "" },
		"bad secret":       func(o *Options) { o.CredentialsSecret = "Bad_Name" },
		"no cloudspace":    func(o *Options) { o.Cloudspaces = nil },
		"odd cloudspace":   func(o *Options) { o.Cloudspaces = []string{"a,b"} },
		"odd domain":       func(o *Options) { o.DomainFilters = []string{"a.example.com --policy=upsert-only"} },
		"odd owner":        func(o *Options) { o.OwnerID = "a=b" },
		"other source":     func(o *Options) { o.Sources = []string{"crd"} },
	} {
		o := opts
		mutate(&o)
		if _, err := Render(o); err == nil || !strings.HasPrefix(err.Error(), "manifests: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRender: the defaults (external-dns's image, both sources) and the objects, in the order
// they are applied (the namespace first).
func TestRender(t *testing.T) {
	stream, err := Render(opts)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Objects(stream)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if strings.Join(kinds, ",") != "Namespace,ServiceAccount,ClusterRole,ClusterRoleBinding,Deployment" {
		t.Errorf("kinds %v", kinds)
	}
	for _, want := range []string{DefaultImage, "--source=service", "--source=ingress", "--cloudspace-id=cs-1", "--txt-owner-id=capvco-team-a-prod"} {
		if !strings.Contains(string(stream), want) {
			t.Errorf("rendered manifests lack %s", want)
		}
	}
}
