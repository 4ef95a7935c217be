package jobs

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/testenv/golden"
)

// params are one Job of each operation for a machine pool, as the reconciler would ask.
func params() map[string]Params {
	policy := Effective(&captfv1.JobPolicy{
		Env:              []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
	})
	base := Params{
		Owner:             Owner{Kind: captfv1.KindMachinePool, Namespace: "ns1", Name: "pool-1", UID: "uid-pool-1", ClusterName: "c1"},
		Attempt:           1,
		InputsHash:        "h2:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
		Policy:            policy,
		ManagerImage:      "ghcr.io/capx-io/capx-manager:v0.1.0",
		Source:            captfv1.WorkspaceSource{Image: "registry.example/modules/pool@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		CredentialsSecret: "cloud-credentials",
	}
	with := func(op string, change func(*Params)) Params {
		p := base
		p.Op = op
		change(&p)
		return p
	}
	return map[string]Params{
		contract.OpPlan: with(contract.OpPlan, func(*Params) {}),
		contract.OpApply: with(contract.OpApply, func(p *Params) {
			p.Attempt = 2
			p.Guard = &Guard{Hash: "h2:approval"}
			p.ExpectPlan = "p2:9a8b7c6d5e4f"
			p.SavedPlan = &SavedPlan{Digest: "d1e5e1", Chunks: []string{"captf-savedplan-0123456789abcdef0123", "captf-savedplan-0123456789abcdef0123-part-1"}}
			p.ForceUnlock = "9c4f3c2e-1f0b-4f5e-9d8c-7b6a5f4e3d2c"
		}),
		contract.OpDestroy: with(contract.OpDestroy, func(p *Params) { p.Source.ImagePullPolicy = corev1.PullAlways }),
		contract.OpRefresh: with(contract.OpRefresh, func(p *Params) {
			p.CredentialsSecret = ""
		}),
		contract.OpDrift: with(contract.OpDrift, func(p *Params) {
			p.Policy.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}
		}),
		contract.OpRestore: with(contract.OpRestore, func(p *Params) {
			p.Restore = &Restore{Serial: 7, Resources: 3, Digest: "5ca1ab1e", Chunks: []string{
				"captf-state-backup-0123456789abcdef-mp-7", "captf-state-backup-0123456789abcdef-mp-7-part-1",
			}}
		}),
	}
}

func TestBuildGolden(t *testing.T) {
	for op, p := range params() {
		t.Run(op, func(t *testing.T) {
			b, err := yaml.Marshal(Build(p))
			if err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, filepath.Join("testdata", op+".yaml"), b)
		})
	}
}

func TestBuild(t *testing.T) {
	for op, p := range params() {
		t.Run(op, func(t *testing.T) {
			g := NewWithT(t)
			job := Build(p)
			g.Expect(Build(p)).To(Equal(job), "pure")
			g.Expect(job.Name).To(Equal(p.Name()))
			g.Expect(len(job.Name)).To(BeNumerically("<=", MaxNameLength))
			g.Expect(job.Namespace).To(Equal("ns1"))
			g.Expect(job.OwnerReferences).To(ConsistOf(p.Owner.ControllerRef()))
			g.Expect(job.Labels).To(Equal(map[string]string{
				"captf.io/managed": "true",
				"captf.infrastructure.cluster.x-k8s.io/owner-kind": "TerraformMachinePool",
				"captf.infrastructure.cluster.x-k8s.io/owner-name": "pool-1",
				"cluster.x-k8s.io/cluster-name":                    "c1",
				"captf.infrastructure.cluster.x-k8s.io/op":         op,
				"captf.infrastructure.cluster.x-k8s.io/attempt":    job.Labels[captfv1.AttemptLabel],
			}))
			g.Expect(job.Spec.Template.Labels).To(Equal(job.Labels), "the Pods are in the manager's cache too")
			g.Expect(job.Annotations).To(HaveKeyWithValue(captfv1.InputsHashAnnotation, p.InputsHash))
			g.Expect(*job.Spec.BackoffLimit).To(BeZero())
			g.Expect(job.Spec.TTLSecondsAfterFinished).To(BeNil(), "the controller prunes by history")
			g.Expect(*job.Spec.ActiveDeadlineSeconds).To(Equal(int64(3600)))

			pod := job.Spec.Template.Spec
			g.Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			g.Expect(pod.ServiceAccountName).To(Equal("captf-runner"))
			g.Expect(*pod.TerminationGracePeriodSeconds).To(Equal(int64(600)))
			g.Expect(*pod.SecurityContext.FSGroup).To(Equal(int64(65532)))
			g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
			g.Expect(pod.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "registry"}}))

			g.Expect(pod.InitContainers).To(HaveLen(1))
			runner := pod.InitContainers[0]
			g.Expect(runner.Name).To(Equal("runner"))
			g.Expect(runner.Image).To(Equal(p.ManagerImage))
			g.Expect(runner.Command).To(Equal([]string{"/manager", "runner", "copy", "/captf/bin/runner"}))

			g.Expect(pod.Containers).To(HaveLen(1))
			source := pod.Containers[0]
			g.Expect(source.Name).To(Equal("source"))
			g.Expect(source.Image).To(Equal(p.Source.Image))
			g.Expect(source.Command).To(Equal([]string{"/captf/bin/runner", "run"}))
			g.Expect(source.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageReadFile))
			g.Expect(source.Args).To(ContainElements(
				"--op="+op, "--stop-timeout=570s", "--lock-timeout=300s",
				"--backend-config=secret_suffix="+contract.StateSuffix("ns1", captfv1.KindMachinePool, "pool-1"),
				"--backend-config=namespace=ns1", "--backend-config=in_cluster_config=true",
				`--backend-config=labels={"captf.infrastructure.cluster.x-k8s.io/owner-kind"="TerraformMachinePool","captf.infrastructure.cluster.x-k8s.io/owner-name"="pool-1","captf.io/managed"="true","cluster.x-k8s.io/cluster-name"="c1","clusterctl.cluster.x-k8s.io/move"=""}`,
			))
			g.Expect(source.Env[:6]).To(Equal([]corev1.EnvVar{
				{Name: "TF_IN_AUTOMATION", Value: "1"}, {Name: "TF_INPUT", Value: "0"}, {Name: "HOME", Value: "/captf/work"},
				{Name: "TMPDIR", Value: "/tmp"}, {Name: "KUBE_NAMESPACE", Value: "ns1"}, {Name: "CHECKPOINT_DISABLE", Value: "1"},
			}))
			g.Expect(source.Env).To(ContainElement(corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}))

			for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
				sc := c.SecurityContext
				g.Expect(*sc.RunAsNonRoot && *sc.ReadOnlyRootFilesystem && !*sc.AllowPrivilegeEscalation && !*sc.Privileged).To(BeTrue(), c.Name)
				g.Expect(*sc.RunAsUser).To(Equal(int64(65532)), c.Name)
				g.Expect(sc.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}), c.Name)
				for _, m := range c.VolumeMounts {
					g.Expect(slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })).To(BeTrue(), "%s mounts %s", c.Name, m.Name)
				}
			}
			mounts := map[string]string{}
			for _, m := range source.VolumeMounts {
				mounts[m.MountPath] = m.Name
				if m.Name != "work" && m.Name != "tmp" {
					g.Expect(m.ReadOnly).To(BeTrue(), m.Name)
				}
			}
			g.Expect(mounts).To(HaveKeyWithValue("/captf/bin", "runner"))
			g.Expect(mounts).To(HaveKeyWithValue("/captf/work", "work"))
			g.Expect(mounts).To(HaveKeyWithValue("/tmp", "tmp"))
			g.Expect(mounts).To(HaveKeyWithValue("/captf/config", "config"))

			// No Job is given the plan key: the manager computes every plan hash itself.
			for _, v := range pod.Volumes {
				for _, src := range projected(v) {
					g.Expect(src).NotTo(HavePrefix("captf-plankey-"), v.Name)
				}
			}
			for _, a := range source.Args {
				g.Expect(a).NotTo(HavePrefix("--plan-key"))
			}
			creds := p.CredentialsSecret != ""
			g.Expect(mounts).To(Equal(withIf(mounts, creds, "/var/run/captf/credentials", "creds")))
			g.Expect(source.EnvFrom != nil).To(Equal(creds))

			// Disk is bounded: every emptyDir has a size limit and every container an
			// ephemeral-storage limit (issue 9: a module must not fill its node).
			for _, v := range pod.Volumes {
				if v.EmptyDir != nil {
					g.Expect(v.EmptyDir.SizeLimit).NotTo(BeNil(), "emptyDir %s has a size limit", v.Name)
				}
			}
			for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
				g.Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceEphemeralStorage), c.Name)
			}
			// The ServiceAccount token reaches the module container only (issue 9): it is not
			// automounted, and the init container mounts no token.
			g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
			g.Expect(mounts).To(HaveKeyWithValue("/var/run/secrets/kubernetes.io/serviceaccount", "kube-api-access"))
			for _, m := range runner.VolumeMounts {
				g.Expect(m.Name).NotTo(Equal("kube-api-access"))
			}

			safe := op == contract.OpApply || op == contract.OpDestroy || op == contract.OpRestore
			g.Expect(job.Spec.Template.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false").To(Equal(safe))
			for _, v := range pod.Volumes {
				if v.Secret != nil {
					g.Expect(*v.Secret.DefaultMode).To(Equal(int32(0o440)), v.Name)
				}
			}
		})
	}
}

// projected lists the Secrets a volume mounts.
func projected(v corev1.Volume) []string {
	var out []string
	if v.Secret != nil {
		out = append(out, v.Secret.SecretName)
	}
	if v.Projected != nil {
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				out = append(out, s.Secret.Name)
			}
		}
	}
	return out
}

// withIf returns m, which must hold key exactly when want is true.
func withIf(m map[string]string, want bool, key, value string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	delete(out, key)
	if want {
		out[key] = value
	}
	return out
}

func TestParamsValidate(t *testing.T) {
	for op, p := range params() {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", op, err)
		}
	}
	tests := []struct {
		name   string
		op     string
		change func(*Params)
		want   string
	}{
		{"unknown op", contract.OpApply, func(p *Params) { p.Op = "upgrade" }, "unknown operation"},
		{"no owner UID", contract.OpApply, func(p *Params) { p.Owner.UID = "" }, "UID are required"},
		{"no module image", contract.OpApply, func(p *Params) { p.Source.Image = "" }, "module image are required"},
		{"guard on destroy", contract.OpDestroy, func(p *Params) { p.Guard = &Guard{Hash: "h"} }, "applies only to apply"},
		{"guard without hash", contract.OpApply, func(p *Params) { p.Guard = &Guard{} }, "needs the hash"},
		{"saved plan on a plan", contract.OpPlan, func(p *Params) { p.SavedPlan = &SavedPlan{Digest: "d", Chunks: []string{"x"}} }, "applies only to apply"},
		{"saved plan without approval", contract.OpApply, func(p *Params) { p.ExpectPlan = "" }, "needs the approved hash"},
		{"saved plan without digest", contract.OpApply, func(p *Params) { p.SavedPlan = &SavedPlan{Chunks: []string{"x"}} }, "its digest"},
		{"saved plan without chunks", contract.OpApply, func(p *Params) { p.SavedPlan = &SavedPlan{Digest: "d"} }, "1 to 16 chunk Secrets"},
		{"restore without chunks", contract.OpRestore, func(p *Params) { p.Restore.Chunks = nil }, "chunk Secrets"},
		{"restore data on a refresh", contract.OpRefresh, func(p *Params) { p.Restore = &Restore{} }, "restores nothing"},
		{"lock timeout past the deadline", contract.OpRefresh, func(p *Params) { p.Policy.ActiveDeadlineSeconds = 60 }, "lockTimeoutSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := params()[tt.op]
			if p.Restore != nil {
				r := *p.Restore
				p.Restore = &r
			}
			tt.change(&p)
			NewWithT(t).Expect(p.Validate()).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

func TestBuildOperationFlags(t *testing.T) {
	g := NewWithT(t)
	ps := params()
	apply := Build(ps[contract.OpApply]).Spec.Template.Spec.Containers[0].Args
	g.Expect(apply).To(ContainElements("--inputs-hash=h2:approval", "--expect-plan=p2:9a8b7c6d5e4f",
		"--saved-plan-chunks=2", "--saved-plan-digest=d1e5e1", "--force-unlock=9c4f3c2e-1f0b-4f5e-9d8c-7b6a5f4e3d2c"))
	g.Expect(Build(ps[contract.OpApply]).Annotations).To(HaveKeyWithValue(captfv1.PlanHashAnnotation, "p2:9a8b7c6d5e4f"))
	approved := Build(ps[contract.OpApply]).Spec.Template.Spec.Volumes[3]
	g.Expect(approved.Name).To(Equal("config"))
	g.Expect(approved.Projected.Sources).To(HaveLen(3))
	for i, src := range approved.Projected.Sources[1:] {
		g.Expect(src.Secret.Name).To(Equal(ps[contract.OpApply].SavedPlan.Chunks[i]))
		g.Expect(src.Secret.Items).To(Equal([]corev1.KeyToPath{{Key: "plan.json.gz", Path: "saved-plan/" + string(rune('0'+i))}}))
	}

	// Flags of one operation never leak into another's Job.
	p := ps[contract.OpDestroy]
	p.Guard, p.ExpectPlan, p.Restore = &Guard{Hash: "h"}, "p2:x", &Restore{Chunks: []string{"x"}}
	p.SavedPlan = &SavedPlan{Digest: "d", Chunks: []string{"y"}}
	for _, a := range Build(p).Spec.Template.Spec.Containers[0].Args {
		g.Expect(a).NotTo(Or(HavePrefix("--inputs-hash"), HavePrefix("--expect-plan"), HavePrefix("--restore"), HavePrefix("--saved-plan")))
	}
	g.Expect(Build(p).Spec.Template.Spec.Volumes[3].Secret).NotTo(BeNil(), "a destroy projects no chunks")

	restore := Build(ps[contract.OpRestore])
	g.Expect(restore.Annotations).To(HaveKeyWithValue(captfv1.RestoreSerialAnnotation, "7"))
	g.Expect(restore.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--restore-chunks=2", "--restore-resources=3", "--restore-digest=5ca1ab1e"))
	config := restore.Spec.Template.Spec.Volumes[3]
	g.Expect(config.Name).To(Equal("config"))
	g.Expect(config.Projected.Sources).To(HaveLen(3))
	g.Expect(config.Projected.Sources[0].Secret.Name).To(Equal(RunSecretName(restore.Name)))
	g.Expect(config.Projected.Sources[0].Secret.Items).To(BeEmpty(), "main.tf.json and terraform.tfvars.json at the top")
	for i, src := range config.Projected.Sources[1:] {
		g.Expect(src.Secret.Name).To(Equal(ps[contract.OpRestore].Restore.Chunks[i]))
		g.Expect(src.Secret.Items).To(Equal([]corev1.KeyToPath{{Key: "tfstate", Path: "restore/" + string(rune('0'+i))}}))
	}
	g.Expect(*config.Projected.DefaultMode).To(Equal(int32(0o440)))

	refresh := Build(ps[contract.OpRefresh])
	g.Expect(refresh.Spec.Template.Spec.Volumes[3].Secret.SecretName).To(Equal(RunSecretName(refresh.Name)))
	g.Expect(strings.Join(refresh.Spec.Template.Spec.Containers[0].Args, " ")).NotTo(ContainSubstring("--force-unlock"))
}

// TestBuildSecretEnv: every variable the Job fills from a Secret is named to the runner, which
// redacts its value whatever the name; plain values are not.
func TestBuildSecretEnv(t *testing.T) {
	g := NewWithT(t)
	p := params()[contract.OpApply]
	p.Policy.Env = append(p.Policy.Env, corev1.EnvVar{Name: "DB_CONN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "url"}}})
	args := Build(p).Spec.Template.Spec.Containers[0].Args
	g.Expect(args).To(ContainElement("--secret-env=DB_CONN"))
	g.Expect(args).NotTo(ContainElement("--secret-env=HTTPS_PROXY"))
}

// TestBuildWatchFilter: the Job of an object a --watch-filter manager serves carries the
// object's watch-filter label, so that manager sees the Job's events; other Jobs carry none.
func TestBuildWatchFilter(t *testing.T) {
	g := NewWithT(t)
	p := params()[contract.OpApply]
	g.Expect(Build(p).Labels).NotTo(HaveKey(clusterv1.WatchLabel))
	p.Owner.WatchFilter = "tenant-a"
	g.Expect(Build(p).Labels).To(HaveKeyWithValue(clusterv1.WatchLabel, "tenant-a"))

	tm := &captfv1.TerraformMachine{}
	tm.Labels = map[string]string{clusterv1.WatchLabel: "tenant-a"}
	o, err := OwnerOf(tm, "c1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.WatchFilter).To(Equal("tenant-a"))
}
