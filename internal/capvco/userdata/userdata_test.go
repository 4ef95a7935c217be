package userdata

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"os/exec"
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
			got, err := Build([]byte(cloudConfig), "cloud-config", gpu)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != cloudConfig {
				t.Errorf("user_data changed:\n%s", got)
			}
		})
	}
	// Even data Build could not merge passes through untouched when nothing is merged.
	got, err := Build([]byte("{\"ignition\":{}}"), "ignition", nil)
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
			got, err := Build([]byte(tc.bootstrap), "cloud-config", gpu)
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
			again, _ := Build([]byte(tc.bootstrap), "", gpu)
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
			_, err := Build([]byte(tc.bootstrap), tc.format, gpu(tc.version))
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
		out, err := Build(bootstrap, "cloud-config", &capvcov1.GPUSpec{Count: 1, DriverVersion: "550"})
		if err != nil {
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error is not ErrUnsupported: %v", err)
			}
			return
		}
		parts := parse(t, out)
		if len(parts) < 2 || parts[len(parts)-1].filename != GPUScriptName {
			t.Fatalf("no driver part last: %+v", parts)
		}
	})
}
