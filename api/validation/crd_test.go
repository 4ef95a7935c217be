package validation_test

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

func TestEveryCRDInstallsWithContractLabels(t *testing.T) {
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := env.Client.List(context.Background(), &crds); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"terraformclusters": true, "terraformmachines": true, "terraformmachinepools": true,
		"terraformclustertemplates": true, "terraformmachinetemplates": true,
		"terraformmachinepooltemplates": true, "terraformmachinepoolmachines": true, "terraformplans": true,
		"vcoclusters": true, "vcomachines": true, "vcoclustertemplates": true, "vcomachinetemplates": true,
	}
	for _, crd := range crds.Items {
		if crd.Spec.Group != captfv1.GroupVersion.Group || !want[crd.Spec.Names.Plural] {
			continue
		}
		delete(want, crd.Spec.Names.Plural)
		if got := crd.Labels["cluster.x-k8s.io/v1beta2"]; got != "v1alpha1" {
			t.Errorf("%s: label cluster.x-k8s.io/v1beta2 = %q, want v1alpha1 (CAPI resolves the contract version from it)", crd.Name, got)
		}
		if _, ok := crd.Labels["clusterctl.cluster.x-k8s.io"]; !ok {
			t.Errorf("%s: missing label clusterctl.cluster.x-k8s.io (clusterctl move would not see the kind)", crd.Name)
		}
		established := false
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			t.Errorf("%s is not established", crd.Name)
		}
	}
	for plural := range want {
		t.Errorf("CRD %s is not installed", plural)
	}
}

// createCase creates an object and expects it refused with a message containing wantErr, or
// accepted when wantErr is empty.
type createCase struct {
	name    string
	obj     client.Object
	wantErr string
}

func runCreates(t *testing.T, ns string, cases []createCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.obj.SetNamespace(ns)
			err := env.Client.Create(context.Background(), tc.obj)
			checkErr(t, err, tc.wantErr)
		})
	}
}

func checkErr(t *testing.T, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("want accepted, got %v", err)
	case wantErr != "" && err == nil:
		t.Fatalf("want refused with %q, got accepted", wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("want an error containing %q, got %v", wantErr, err)
	}
}

func TestCAPVCOValidation(t *testing.T) {
	ns := env.NewNamespace(t)
	vc := func(name string, mutate func(*capvcov1.VCOCluster)) *capvcov1.VCOCluster {
		c := testenv.VCOCluster("", name, "c1", "nl-rmd-dc01-001", "creds")
		mutate(c)
		return c
	}
	vm := func(name string, mutate func(*capvcov1.VCOMachine)) *capvcov1.VCOMachine {
		m := testenv.VCOMachine("", name, "c1", 7)
		mutate(m)
		return m
	}
	runCreates(t, ns, []createCase{
		{"valid cluster", vc("ok", func(*capvcov1.VCOCluster) {}), ""},
		{"private cloudspace refused", vc("private", func(c *capvcov1.VCOCluster) {
			c.Spec.Cloudspace.Private = ptr.To(true)
		}), "private cloudspaces are not supported yet"},
		{"managed vault refused", vc("vault", func(c *capvcov1.VCOCluster) {
			c.Spec.Encryption = &capvcov1.EncryptionSpec{VaultMode: "managed"}
		}), "vaultMode managed is not supported yet"},
		{"external vault needs an address", vc("vault-ext", func(c *capvcov1.VCOCluster) {
			c.Spec.Encryption = &capvcov1.EncryptionSpec{VaultMode: "external"}
		}), "vaultAddress is required"},
		{"sriov without credential refused", vc("sriov", func(c *capvcov1.VCOCluster) {
			c.Spec.SRIOV = &capvcov1.SRIOVSpec{Enabled: true}
		}), "sriov.credentialSecretRef is required when SR-IOV is enabled"},
		{"sriov with credential accepted", vc("sriov-ok", func(c *capvcov1.VCOCluster) {
			c.Spec.SRIOV = &capvcov1.SRIOVSpec{Enabled: true}
			c.Spec.SRIOV.CredentialSecretRef = &corev1.LocalObjectReference{Name: "sriov"}
		}), ""},
		{"bad private network", vc("cidr", func(c *capvcov1.VCOCluster) {
			c.Spec.Cloudspace.PrivateNetwork = "192.168.1.0"
		}), "privateNetwork must be a CIDR"},
		{"half endpoint refused", vc("half", func(c *capvcov1.VCOCluster) {
			c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "1.2.3.4"}
		}), "set host and port together"},
		{"duplicate geo sites refused", vc("geo", func(c *capvcov1.VCOCluster) {
			c.Spec.Geo = &capvcov1.GeoSpec{Sites: []capvcov1.GeoSite{
				{Name: "b", Location: "be-mac-dc01-001"}, {Name: "b", Location: "be-mac-dc01-002"},
			}}
		}), "site names must be unique"},
		{"valid machine", vm("ok", func(*capvcov1.VCOMachine) {}), ""},
		{"image id and name refused", vm("img", func(m *capvcov1.VCOMachine) {
			m.Spec.Image.Name = "ubuntu"
		}), "set exactly one of image.id or image.name"},
		{"gpu without profile or vendor refused", vm("gpu", func(m *capvcov1.VCOMachine) {
			m.Spec.GPU = &capvcov1.GPUSpec{Count: 1}
		}), "set gpu.profileId or gpu.vendor"},
		{"gpu driver release refused", vm("gpu-release", func(m *capvcov1.VCOMachine) {
			m.Spec.GPU = &capvcov1.GPUSpec{Vendor: "nvidia", Count: 1, DriverVersion: "550.127.05"}
		}), "gpu.driverVersion must be an NVIDIA driver branch such as 550"},
		{"gpu driver branch accepted", vm("gpu-branch", func(m *capvcov1.VCOMachine) {
			m.Spec.GPU = &capvcov1.GPUSpec{Vendor: "nvidia", Count: 1, DriverVersion: "550"}
		}), ""},
	})

	t.Run("location is immutable", func(t *testing.T) {
		c := vc("immut", func(*capvcov1.VCOCluster) {})
		c.SetNamespace(ns)
		mustCreate(t, c)
		c.Spec.Location = "be-mac-dc01-001"
		checkErr(t, env.Client.Update(context.Background(), c), "location is immutable")
	})
	t.Run("machine shape is immutable", func(t *testing.T) {
		m := vm("immut", func(*capvcov1.VCOMachine) {})
		m.SetNamespace(ns)
		mustCreate(t, m)
		m.Spec.VCPUs = 8
		checkErr(t, env.Client.Update(context.Background(), m), "image, vcpus, memoryMiB and bootDiskGiB are immutable")
	})
	t.Run("providerID is set once", func(t *testing.T) {
		m := vm("pid", func(*capvcov1.VCOMachine) {})
		m.SetNamespace(ns)
		mustCreate(t, m)
		m.Spec.ProviderID = "vco://nl-rmd-dc01-001/1"
		checkErr(t, env.Client.Update(context.Background(), m), "")
		m.Spec.ProviderID = "vco://nl-rmd-dc01-001/2"
		checkErr(t, env.Client.Update(context.Background(), m), "providerID is set once")
	})
}

func TestCAPTFValidation(t *testing.T) {
	ns := env.NewNamespace(t)
	tc := func(name string, mutate func(*captfv1.TerraformCluster)) *captfv1.TerraformCluster {
		c := testenv.TerraformCluster("", name, "c1", "example.com/cluster:v1")
		mutate(c)
		return c
	}
	runCreates(t, ns, []createCase{
		{"valid cluster", tc("ok", func(*captfv1.TerraformCluster) {}), ""},
		{"empty image refused", tc("noimage", func(c *captfv1.TerraformCluster) { c.Spec.Source.Image = "" }), "spec.source.image"},
		{"reserved variable refused", tc("reserved", func(c *captfv1.TerraformCluster) {
			c.Spec.Variables = map[string]apiextensionsv1.JSON{"captf_tags": {Raw: []byte(`{}`)}}
		}), "variable names starting with captf_ are reserved for the inputs CAPTF injects: captf_tags"},
		{"bad variable name refused", tc("badname", func(c *captfv1.TerraformCluster) {
			c.Spec.Variables = map[string]apiextensionsv1.JSON{"9lives": {Raw: []byte(`1`)}}
		}), "variable names must match"},
		{"variables source needs exactly one ref", tc("vfrom", func(c *captfv1.TerraformCluster) {
			c.Spec.VariablesFrom = []captfv1.VariablesSource{{}}
		}), "set exactly one of configMapRef or secretRef"},
		{"lock timeout must be below the deadline", tc("lock", func(c *captfv1.TerraformCluster) {
			c.Spec.Jobs = &captfv1.JobPolicy{LockTimeoutSeconds: ptr.To[int32](600), ActiveDeadlineSeconds: ptr.To[int64](300)}
		}), "lockTimeoutSeconds must be shorter than activeDeadlineSeconds"},
		{"runner env refused", tc("env", func(c *captfv1.TerraformCluster) {
			c.Spec.Jobs = &captfv1.JobPolicy{Env: []corev1.EnvVar{{Name: "TF_LOG", Value: "TRACE"}}}
		}), "are set by the runner and cannot be overridden"},
		{"machine cannot remediate drift", &captfv1.TerraformMachine{
			ObjectMeta: metav1.ObjectMeta{Name: "m-drift"},
			Spec: captfv1.TerraformMachineSpec{WorkspaceSpec: captfv1.WorkspaceSpec{
				Source: captfv1.WorkspaceSource{Image: "example.com/machine:v1"},
				Drift:  &captfv1.DriftPolicy{Action: captfv1.DriftActionRemediate},
			}},
		}, "machines only report drift"},
	})

	t.Run("endpoint is write-once", func(t *testing.T) {
		c := tc("ep", func(*captfv1.TerraformCluster) {})
		c.SetNamespace(ns)
		mustCreate(t, c)
		c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}
		checkErr(t, env.Client.Update(context.Background(), c), "")
		c.Spec.ControlPlaneEndpoint.Port = 443
		checkErr(t, env.Client.Update(context.Background(), c), "controlPlaneEndpoint cannot change once set")
	})
	t.Run("machine source and variables are immutable", func(t *testing.T) {
		m := testenv.TerraformMachine(ns, "immut", "c1", "example.com/machine:v1")
		mustCreate(t, m)
		m.Spec.Source.Image = "example.com/machine:v2"
		checkErr(t, env.Client.Update(context.Background(), m), "source is immutable")
		m.Spec.Source.Image = "example.com/machine:v1"
		m.Spec.Variables = map[string]apiextensionsv1.JSON{"size": {Raw: []byte(`"large"`)}}
		checkErr(t, env.Client.Update(context.Background(), m), "variables are immutable")
		m.Spec.Variables = nil
		m.Labels["edited"] = "true"
		checkErr(t, env.Client.Update(context.Background(), m), "")
	})
	t.Run("template variables are immutable", func(t *testing.T) {
		tpl := &captfv1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tpl"}}
		tpl.Spec.Template.Spec.Source.Image = "example.com/machine:v1"
		tpl.Spec.Template.Spec.Variables = map[string]apiextensionsv1.JSON{"size": {Raw: []byte(`"small"`)}}
		mustCreate(t, tpl)
		tpl.Spec.Template.Spec.Variables["size"] = apiextensionsv1.JSON{Raw: []byte(`"large"`)}
		checkErr(t, env.Client.Update(context.Background(), tpl), "template.spec is immutable")
	})
	t.Run("approval cannot be withdrawn", func(t *testing.T) {
		p := &captfv1.TerraformPlan{ObjectMeta: metav1.ObjectMeta{Name: "plan"}}
		p.SetNamespace(ns)
		p.Spec = captfv1.TerraformPlanSpec{
			TargetRef: captfv1.PlanTarget{Kind: "TerraformCluster", Name: "ep"},
			PlanHash:  "p2:abc", InputsHash: "h2:def", Reason: captfv1.PlanReasonManual,
		}
		mustCreate(t, p)
		alice, bob := impersonate(t, "alice"), impersonate(t, "bob")
		p.Spec.Approved = true
		checkErr(t, alice.Update(context.Background(), p), "approvedBy is required when approved is true")
		p.Spec.ApprovedBy = "alice"
		checkErr(t, bob.Update(context.Background(), p), "spec.approvedBy must be your own user name as the API server authenticates you (bob)")
		checkErr(t, alice.Update(context.Background(), p), "")
		p.Spec.Approved, p.Spec.ApprovedBy = false, ""
		checkErr(t, alice.Update(context.Background(), p), "an approval cannot be withdrawn")
		p.Spec.Approved, p.Spec.ApprovedBy, p.Spec.PlanHash = true, "alice", "p2:other"
		checkErr(t, alice.Update(context.Background(), p), "the plan itself is immutable")
	})
}

// impersonate returns a client acting as the named user (with full rights, so only admission
// decides).
func impersonate(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
}
