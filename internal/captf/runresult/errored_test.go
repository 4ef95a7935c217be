package runresult

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// A run whose state could not be saved says so in the result: the errored state's size, the
// push's outcome and where a copy is kept survive Encode and Decode.
func TestErroredStateRoundTrip(t *testing.T) {
	g := NewWithT(t)
	r := Result{Version: Version, Op: "apply",
		Steps:        []Step{{Name: "apply", ExitCode: 1}, {Name: "push-errored-state", ExitCode: 1}},
		ErroredState: &ErroredState{Bytes: 3 << 20, CompressedBytes: 1<<20 + 1, PushExitCode: 1, PushError: "Error: Secret too long", Kept: "captf-errored-state-x-0"},
		Error:        &Error{Kind: KindStateNotPersisted, Step: "apply", Summary: "the state could not be saved"},
	}
	b, err := Encode(r)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := Decode(b)
	g.Expect(err).NotTo(HaveOccurred(), string(b))
	g.Expect(got).To(Equal(r))
	g.Expect(got.ErroredState.TooLarge()).To(BeTrue())
	g.Expect((&ErroredState{CompressedBytes: SecretDataLimit}).TooLarge()).To(BeFalse())

	long := r
	es := *r.ErroredState
	es.PushError = strings.Repeat("x", 1000)
	long.ErroredState = &es
	b, err = Encode(long)
	g.Expect(err).NotTo(HaveOccurred())
	got, err = Decode(b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.ErroredState.PushError).To(HaveLen(MaxTextBytes))

	_, err = Decode([]byte(`{"version":1,"op":"apply","erroredState":{"bytes":-1,"compressedBytes":0,"pushExitCode":0}}`))
	g.Expect(err).To(MatchError(ContainSubstring("invalid errored state")))
	red := r.Redact(func(s string) string { return strings.ReplaceAll(s, "Secret", "[redacted]") })
	g.Expect(red.ErroredState.PushError).To(Equal("Error: [redacted] too long"))
	g.Expect(r.ErroredState.PushError).To(Equal("Error: Secret too long"), "Redact copies")
}
