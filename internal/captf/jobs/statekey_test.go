package jobs

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/statekey"
)

// TestBuildStateEncryption: a Job of an object with encrypted state tells the runner the mode,
// the endpoint and its certificate, and gives only the module container a token of the state
// key audience; without encryption nothing of it is in the Job.
func TestBuildStateEncryption(t *testing.T) {
	g := NewWithT(t)
	p := params()[contract.OpApply]
	plain := Build(p).Spec.Template.Spec
	g.Expect(plain.Volumes).NotTo(ContainElement(HaveField("Name", volumeStateKeyToken)))
	g.Expect(plain.Containers[0].Args).NotTo(ContainElement(HavePrefix("--state-encryption")))

	p.StateEncryption = &StateEncryption{Mode: string(statekey.Encrypt), URL: "https://captf-state-key.capx-system.svc:9444/v1/state-key", CAPEM: "-----BEGIN CERTIFICATE-----\n..."}
	g.Expect(p.Validate()).To(Succeed())
	spec := Build(p).Spec.Template.Spec
	g.Expect(spec.Containers[0].Args).To(ContainElements("--state-encryption=encrypt",
		"--state-key-url=https://captf-state-key.capx-system.svc:9444/v1/state-key", "--state-key-ca=-----BEGIN CERTIFICATE-----\n..."))
	var found bool
	for _, v := range spec.Volumes {
		if v.Name == volumeStateKeyToken {
			found = true
			g.Expect(v.Projected.Sources).To(HaveLen(1))
			tok := v.Projected.Sources[0].ServiceAccountToken
			g.Expect(tok.Audience).To(Equal(statekey.Audience))
		}
	}
	g.Expect(found).To(BeTrue())
	g.Expect(spec.Containers[0].VolumeMounts).To(ContainElement(HaveField("MountPath", "/var/run/secrets/captf.io/state-key")))
	g.Expect(spec.InitContainers[0].VolumeMounts).NotTo(ContainElement(HaveField("Name", volumeStateKeyToken)))

	p.StateEncryption.Mode = "on"
	g.Expect(p.Validate()).To(HaveOccurred())
}
