package controllers

import (
	"strings"
	"testing"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/statekey"
)

func TestJobEncryption(t *testing.T) {
	se := &StateEncryption{URL: "https://key.test/v1/state-key", CAPEM: "PEM"}
	want := func(mode statekey.Mode) *jobs.StateEncryption {
		return &jobs.StateEncryption{Mode: string(mode), URL: se.URL, CAPEM: se.CAPEM}
	}
	on := &captfv1.StateEncryption{Mode: captfv1.StateEncryptionEncrypt}
	off := &captfv1.StateEncryption{Mode: captfv1.StateEncryptionDecrypt}
	for _, tc := range []struct {
		name      string
		spec      *captfv1.StateEncryption
		encrypted bool
		manager   *StateEncryption
		want      *jobs.StateEncryption
		err       string
	}{
		{name: "not opted in, plain state: as before, with a key", manager: se},
		{name: "not opted in, plain state: as before, without a key"},
		{name: "Encrypt", spec: on, manager: se, want: want(statekey.Encrypt)},
		{name: "Encrypt over an encrypted state", spec: on, encrypted: true, manager: se, want: want(statekey.Encrypt)},
		{name: "Decrypt", spec: off, encrypted: true, manager: se, want: want(statekey.Decrypt)},
		{name: "field removed while the state is encrypted: decrypt", encrypted: true, manager: se, want: want(statekey.Decrypt)},
		{name: "Encrypt without the manager's key", spec: on, err: "runs without --state-encryption"},
		{name: "Decrypt without the manager's key", spec: off, err: "runs without --state-encryption"},
		{name: "unknown mode", spec: &captfv1.StateEncryption{Mode: "Rot13"}, manager: se, err: `mode "Rot13"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := jobEncryption(tc.spec, tc.encrypted, tc.manager)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("got %+v, want no encryption", *got)
			case tc.want != nil && (got == nil || *got != *tc.want):
				t.Fatalf("got %+v, want %+v", got, *tc.want)
			}
		})
	}
}
