package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/captf/statekey"
)

// DefaultStateKeyToken is where the Job projects the token of audience statekey.Audience.
const DefaultStateKeyToken = statekey.TokenPath

// stateKeyFlags locate the manager's key endpoint; `run` passes them on to the helper.
type stateKeyFlags struct {
	url, caFile, token string
}

func (k *stateKeyFlags) register(cmd *cobra.Command, prefix string) {
	f := cmd.Flags()
	f.StringVar(&k.url, prefix+"url", "", "the manager's state key endpoint (https://.../v1/state-key)")
	f.StringVar(&k.caFile, prefix+"ca-file", "", "PEM file of the certificate the endpoint must present")
	f.StringVar(&k.token, prefix+"token", DefaultStateKeyToken, "the Pod's projected token of audience "+statekey.Audience)
}

func (k *stateKeyFlags) fetch(ctx context.Context) (statekey.Grant, error) {
	ca, err := os.ReadFile(k.caFile)
	if err != nil {
		return statekey.Grant{}, fmt.Errorf("statekey: read the endpoint's certificate: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return statekey.Fetch(ctx, k.url, ca, k.token)
}

// newStateKeyCommand is OpenTofu's external key provider: each OpenTofu command that reads or
// writes the state runs it. It fetches the key of this Pod's state from the manager and
// prints it in the provider protocol; it holds the key only for that moment.
func newStateKeyCommand() *cobra.Command {
	k := &stateKeyFlags{}
	cmd := &cobra.Command{
		Use:   "state-key --url=URL --ca-file=FILE",
		Short: "OpenTofu's external key provider for the state: prints this Pod's state key from the manager",
		Long: `Run by OpenTofu (TF_ENCRYPTION), never by hand: reads the key provider metadata OpenTofu
stored with the state from stdin, fetches this Pod's state key from the manager with the Pod's
projected token, and writes the protocol header and the key to stdout. See docs/captf/state.md.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, err := k.fetch(cmd.Context())
			if err == nil {
				err = statekey.Provide(g, cmd.InOrStdin(), cmd.OutOrStdout())
			}
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "captf state key: %v\n", err)
				return &ExitError{Code: ExitFailed, Err: err}
			}
			return nil
		},
	}
	k.register(cmd, "")
	return cmd
}

// validateEncryption checks the state encryption flags of `run`.
func (o *options) validateEncryption() error {
	mode, err := statekey.ParseMode(o.stateEncryption)
	if err != nil {
		return fmt.Errorf("--state-encryption: %w", err)
	}
	if mode != "" && (o.stateKey.url == "" || (o.stateKey.caFile == "") == (o.stateKeyCA == "")) {
		return fmt.Errorf("--state-encryption=%s needs --state-key-url and one of --state-key-ca (PEM) or --state-key-ca-file", mode)
	}
	return nil
}

// writeStateKeyCA writes --state-key-ca into the work directory for the helper.
func (o *options) writeStateKeyCA() error {
	if o.stateKeyCA == "" {
		return nil
	}
	o.stateKey.caFile = filepath.Join(o.workdir, "state-key-ca.crt")
	return os.WriteFile(o.stateKey.caFile, []byte(o.stateKeyCA), 0o600)
}

// setupEncryption gives the runtime the encryption configuration of --state-encryption: only
// OpenTofu has state encryption (Terraform would ignore TF_ENCRYPTION and write the state in
// the clear), and the key is fetched once first, so a refusal fails the run before any step.
func (r *run) setupEncryption(ctx context.Context) *failure {
	o := r.o
	if o.stateEncryption == "" {
		return nil
	}
	ver := exec.CommandContext(ctx, o.bin, "version")
	ver.Env = envList(r.env)
	out, _ := ver.Output()
	if !bytes.Contains(out, []byte("OpenTofu")) {
		return &failure{kind: runresult.KindImageLayout, step: "state-encryption", summary: fmt.Sprintf(
			"the object's state is to be encrypted, but the module image's runtime %s is not OpenTofu (it reports %q); only OpenTofu encrypts state: use an image with OpenTofu at %s, or turn state encryption off for this object",
			o.bin, runresult.Head(strings.TrimSpace(string(out)), 80), contract.RuntimePath)}
	}
	if err := o.writeStateKeyCA(); err != nil {
		return &failure{kind: runresult.KindStep, step: "state-encryption", summary: err.Error()}
	}
	if _, err := o.stateKey.fetch(ctx); err != nil {
		return &failure{kind: runresult.KindStep, step: "state-encryption", summary: r.red.String(err.Error())}
	}
	cfg, err := statekey.Config(statekey.Mode(o.stateEncryption), []string{o.stateKeyHelper, "state-key",
		"--url=" + o.stateKey.url, "--ca-file=" + o.stateKey.caFile, "--token=" + o.stateKey.token})
	if err != nil {
		return &failure{kind: runresult.KindUsage, step: "state-encryption", summary: err.Error()}
	}
	r.env["TF_ENCRYPTION"] = cfg
	if err := r.tf.SetEnv(r.env); err != nil {
		return &failure{kind: runresult.KindStep, step: "state-encryption", summary: err.Error()}
	}
	r.logf("state encryption: %s, key from %s", o.stateEncryption, o.stateKey.url)
	return nil
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// decryptRestore returns the plain state of an encrypted backup being restored, decrypted in
// memory with this Pod's key (nil for a plain backup): `state push` reads only plain states,
// and the plain state must never reach a file.
func (r *run) decryptRestore(ctx context.Context) ([]byte, *failure) {
	doc, err := os.ReadFile(r.restore)
	if err != nil || !statekey.IsEnvelope(doc) {
		return nil, nil // a plain backup; a read error shows in the push
	}
	fail := func(err error) *failure {
		return &failure{kind: runresult.KindStep, step: "prepare", summary: "runner: the encrypted backup: " + r.red.String(err.Error())}
	}
	g, err := r.o.stateKey.fetch(ctx)
	if err != nil {
		return nil, fail(err)
	}
	env, err := statekey.ParseEnvelope(doc)
	if err != nil {
		return nil, fail(err)
	}
	plain, err := env.OpenGrant(g)
	if err != nil {
		return nil, fail(err)
	}
	return plain, nil
}

// pushInMemory runs `state push -` with the plain state on its standard input: the runtime
// encrypts it on the way to the backend (terraform-exec cannot feed a command's input).
func (r *run) pushInMemory(ctx context.Context, plain []byte) error {
	cmd := exec.CommandContext(ctx, r.o.bin, "state", "push", "-lock=true", "-lock-timeout="+r.o.lockTimeout.String(), "-")
	cmd.Dir = r.root
	cmd.Env = envList(r.env)
	cmd.Stdin = bytes.NewReader(plain)
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = r.o.childGrace()
	return cmd.Run()
}
