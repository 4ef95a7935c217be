package userdata

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

const cloudConfig = "#cloud-config\nruncmd: [\"kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\"]\n"

// parsed is one part of a user_data document as cloud-init sees it (it parses the document
// with Python's email package; net/mail and mime/multipart read it the same way).
type parsed struct {
	mediaType, filename string
	body                string
}

func parse(t *testing.T, doc []byte) []parsed {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("user_data is not a MIME document: %v\n%s", err, doc)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" {
		t.Fatalf("Content-Type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	if msg.Header.Get("MIME-Version") != "1.0" {
		t.Errorf("MIME-Version %q", msg.Header.Get("MIME-Version"))
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var out []parsed
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("part %d: %v", len(out)+1, err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		pmt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		out = append(out, parsed{mediaType: pmt, filename: p.FileName(), body: string(b)})
	}
}

func TestBuildWithoutDriverKeepsTheBootstrapData(t *testing.T) {
	for name, gpu := range map[string]*capvcov1.GPUSpec{
		"no gpu":             nil,
		"gpu without driver": {Vendor: "nvidia", Count: 1},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Build([]byte(cloudConfig), "cloud-config", gpu, nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != cloudConfig {
				t.Errorf("user_data changed:\n%s", got)
			}
		})
	}
	// Even data Build could not merge passes through untouched when nothing is merged.
	got, err := Build([]byte("{\"ignition\":{}}"), "ignition", nil, nil)
	if err != nil || string(got) != "{\"ignition\":{}}" {
		t.Errorf("ignition data without a driver: %q, %v", got, err)
	}
}

func TestBuildAddsTheDriverPartAfterTheBootstrapData(t *testing.T) {
	gpu := &capvcov1.GPUSpec{Vendor: "nvidia", Count: 1, DriverVersion: "550"}
	cases := []struct {
		name, bootstrap string
		wantTypes       []string
	}{
		{"cloud-config", cloudConfig, []string{"text/cloud-config", "text/x-shellscript"}},
		{"kubeadm's jinja template", "## template: jinja\n" + cloudConfig, []string{"text/jinja2", "text/x-shellscript"}},
		{"shell script", "#!/bin/sh\necho hi\n", []string{"text/x-shellscript", "text/x-shellscript"}},
		{"boothook", "#cloud-boothook\necho early\n", []string{"text/cloud-boothook", "text/x-shellscript"}},
		{"archive", "#cloud-config-archive\n- {type: text/cloud-config, content: '{}'}\n", []string{"text/cloud-config-archive", "text/x-shellscript"}},
		{"multipart of its own", "Content-Type: multipart/mixed; boundary=\"XYZ\"\nMIME-Version: 1.0\n\n--XYZ\nContent-Type: text/cloud-config\n\n" +
			cloudConfig + "--XYZ\nContent-Type: text/x-shellscript\nContent-Disposition: attachment; filename=\"extra.sh\"\n\n#!/bin/sh\necho extra\n--XYZ--\n",
			[]string{"text/cloud-config", "text/x-shellscript", "text/x-shellscript"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Build([]byte(tc.bootstrap), "cloud-config", gpu, nil)
			if err != nil {
				t.Fatal(err)
			}
			parts := parse(t, got)
			var types []string
			for _, p := range parts {
				types = append(types, p.mediaType)
			}
			if strings.Join(types, ",") != strings.Join(tc.wantTypes, ",") {
				t.Fatalf("part types %v, want %v", types, tc.wantTypes)
			}
			last := parts[len(parts)-1]
			if last.filename != GPUScriptName {
				t.Errorf("driver part named %q", last.filename)
			}
			want, _ := GPUScript("550")
			if last.body != string(want) {
				t.Errorf("driver part body differs from GPUScript(550)")
			}
			if !strings.Contains(tc.name, "multipart") && parts[0].body != tc.bootstrap {
				t.Errorf("bootstrap part changed:\n%q\nwant\n%q", parts[0].body, tc.bootstrap)
			}
			if strings.Contains(tc.name, "multipart") {
				if parts[0].body != strings.TrimSuffix(cloudConfig, "\n") || parts[1].filename != "extra.sh" || parts[1].body != "#!/bin/sh\necho extra" {
					t.Errorf("the bootstrap's own parts changed: %+v", parts[:2])
				}
			}
			again, _ := Build([]byte(tc.bootstrap), "", gpu, nil)
			if !bytes.Equal(again, got) {
				t.Errorf("Build is not deterministic")
			}
		})
	}
}

func TestGPUScript(t *testing.T) {
	script, err := GPUScript("550")
	if err != nil {
		t.Fatal(err)
	}
	s := string(script)
	for _, want := range []string{
		"#!/bin/sh\n",
		`ubuntu-drivers install --gpgpu "nvidia:550-server"`,
		`"nvidia-utils-550-server"`,
		"deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /",
		"nvidia-container-toolkit\n",
		"nvidia-ctk runtime configure --runtime=containerd --set-as-default",
		"systemctl restart containerd",
		"if ! nvidia-smi; then",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q", want)
		}
	}
	// The shell parses it (dash, as /bin/sh on Ubuntu).
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no sh: %v", err)
	}
	cmd := exec.Command(sh, "-n")
	cmd.Stdin = bytes.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v: %s", err, out)
	}
}

func TestBuildRefusesWhatItCannotMerge(t *testing.T) {
	gpu := func(v string) *capvcov1.GPUSpec {
		return &capvcov1.GPUSpec{Vendor: "nvidia", Count: 1, DriverVersion: v}
	}
	cases := []struct {
		name, bootstrap, format, version, want string
	}{
		{"exact release", cloudConfig, "cloud-config", "550.127.05", `want an NVIDIA driver branch such as "550"`},
		{"shell injection", cloudConfig, "cloud-config", "550; rm -rf /", "want an NVIDIA driver branch"},
		{"ignition", `{"ignition":{"version":"3.4.0"}}`, "ignition", "550", `format "ignition" cannot carry the GPU driver install`},
		{"unknown type", "hello world\n", "cloud-config", "550", `starts with "hello world", not a cloud-init type`},
		{"empty", "  \n", "cloud-config", "550", "bootstrap data is empty"},
		{"gzip", "\x1f\x8b\x08\x00", "cloud-config", "550", "gzip-compressed"},
		{"multipart without boundary", "Content-Type: multipart/mixed\n\nbody", "cloud-config", "550", "without a boundary"},
		{"multipart with the driver part already", "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Disposition: attachment; filename=\"" + GPUScriptName + "\"\n\n#!/bin/sh\n--B--\n", "", "550", "already has a part named"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build([]byte(tc.bootstrap), tc.format, gpu(tc.version), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("%v is not ErrUnsupported", err)
			}
		})
	}
}

func FuzzBuild(f *testing.F) {
	f.Add([]byte(cloudConfig))
	f.Add([]byte("## template: jinja\n" + cloudConfig))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=\"XYZ\"\n\n--XYZ\nContent-Type: text/cloud-config\n\n#cloud-config\n--XYZ--\n"))
	f.Fuzz(func(t *testing.T, bootstrap []byte) {
		out, err := Build(bootstrap, "cloud-config", &capvcov1.GPUSpec{Count: 1, DriverVersion: "550"}, accelerator)
		if err != nil {
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error is not ErrUnsupported: %v", err)
			}
			return
		}
		parts := parse(t, out)
		if len(parts) < 3 || parts[len(parts)-1].filename != GPUScriptName || parts[len(parts)-2].filename != NodeLabelsScriptName {
			t.Fatalf("not the label part then the driver part last: %+v", parts)
		}
	})
}

var accelerator = map[string]string{"cluster-api/accelerator": "nvidia"}

// TestBuildLabelsTheNode: a machine whose node carries labels gets the label part after the
// bootstrap data and before the driver part, both named to sort before cloud-init's runcmd
// (where kubeadm starts the kubelet); ignition data cannot carry it and says what to do.
func TestBuildLabelsTheNode(t *testing.T) {
	for name, tc := range map[string]struct {
		gpu   *capvcov1.GPUSpec
		files []string
	}{
		"labels only":         {&capvcov1.GPUSpec{Vendor: "nvidia"}, []string{"bootstrap", NodeLabelsScriptName}},
		"labels and a driver": {&capvcov1.GPUSpec{Vendor: "nvidia", DriverVersion: "550"}, []string{"bootstrap", NodeLabelsScriptName, GPUScriptName}},
	} {
		t.Run(name, func(t *testing.T) {
			doc, err := Build([]byte(cloudConfig), "cloud-config", tc.gpu, accelerator)
			if err != nil {
				t.Fatal(err)
			}
			parts := parse(t, doc)
			var files []string
			for _, p := range parts {
				files = append(files, p.filename)
			}
			if strings.Join(files, " ") != strings.Join(tc.files, " ") || parts[0].body != cloudConfig {
				t.Fatalf("parts %v", files)
			}
			if parts[1].mediaType != "text/x-shellscript" || !strings.Contains(parts[1].body, "--node-labels=$labels") ||
				!strings.Contains(parts[1].body, "labels='cluster-api/accelerator=nvidia'") {
				t.Errorf("label part %s:\n%s", parts[1].mediaType, parts[1].body)
			}
			for _, f := range files[1:] {
				if f >= "runcmd" {
					t.Errorf("%s runs after runcmd", f)
				}
			}
		})
	}
	_, err := Build([]byte("{\"ignition\":{}}"), "ignition", &capvcov1.GPUSpec{Vendor: "nvidia"}, accelerator)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "--node-labels") {
		t.Errorf("ignition with labels: %v", err)
	}
	if _, err := NodeLabelsScript(map[string]string{"a b": "c"}, KubeletDefaults); err == nil {
		t.Error("a label key with a space rendered")
	}
	if _, err := NodeLabelsScript(map[string]string{"k": "v;reboot"}, KubeletDefaults); err == nil {
		t.Error("a label value with a semicolon rendered")
	}
}

// TestNodeLabelsScriptRuns runs the label script with /bin/sh against the kubelet environment
// files an image can have (none, Debian's empty KUBELET_EXTRA_ARGS=, one with flags of its own)
// and reads KUBELET_EXTRA_ARGS back as systemd's EnvironmentFile would hand it to the kubelet.
func TestNodeLabelsScriptRuns(t *testing.T) {
	for name, tc := range map[string]struct{ before, want string }{
		"no file":               {"", "--node-labels=cluster-api/accelerator=nvidia"},
		"Debian's empty line":   {"KUBELET_EXTRA_ARGS=\n", "--node-labels=cluster-api/accelerator=nvidia"},
		"flags of its own":      {"KUBELET_EXTRA_ARGS=\"--v=2 --node-labels=pool=gpu\"\n", "--node-labels=cluster-api/accelerator=nvidia --v=2 --node-labels=pool=gpu"},
		"single-quoted flags":   {"KUBELET_EXTRA_ARGS='--v=2'\n", "--node-labels=cluster-api/accelerator=nvidia --v=2"},
		"other variables first": {"FOO=bar\nKUBELET_EXTRA_ARGS=--v=2\n", "--node-labels=cluster-api/accelerator=nvidia --v=2"},
	} {
		t.Run(name, func(t *testing.T) {
			file := t.TempDir() + "/default/kubelet"
			if tc.before != "" {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			script, err := NodeLabelsScript(accelerator, file)
			if err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("/bin/sh", "-c", string(script)).CombinedOutput(); err != nil {
				t.Fatalf("script: %v\n%s", err, out)
			}
			out, err := exec.Command("/bin/sh", "-c", `set -a; . "$1"; printf %s "$KUBELET_EXTRA_ARGS"`, "sh", file).Output()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("KUBELET_EXTRA_ARGS = %q, want %q", got, tc.want)
			}
		})
	}
}
