// Package runner is the program every CAPTF Job runs inside the module image. `runner copy`
// runs in the Job's init container and copies this binary (the manager) into the shared
// volume; `runner run` runs in the module container: it checks the image layout, prepares the
// work folder from the rendered root module, drives the module's runtime (tofu or terraform)
// through the steps of one operation with terraform-exec, streams redacted output to the pod
// log, and writes a bounded result document (package runresult) to the termination log.
//
// docs/captf/runner.md is the reference for flags, steps, the result and exit codes.
package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/captf/savedplan"
)

// Exit codes of `runner run`.
const (
	ExitOK     = 0
	ExitFailed = 1 // the operation failed, for any reason the result's error.kind names
	ExitUsage  = 2 // invalid flags
)

// ExitError is a runner command's failure together with the process exit code it asks for.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode maps the error of a runner command to the process exit code: 0 for nil, the code of
// an ExitError, and ExitFailed for anything else.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitFailed
}

// IO is what the runner commands use besides files.
type IO struct {
	// Out receives the pod log: runtime output (redacted) and the runner's own lines.
	Out io.Writer
	// Environ returns the runner's environment; nil means os.Environ. Tests pass their own
	// rather than changing the test process's environment.
	Environ func() []string
}

// NewCommand returns the `runner` command with its `copy` and `run` subcommands, to be mounted
// under the manager's root command. Errors it returns carry their exit code (ExitCode); they
// are already logged to io.Out, so the caller should silence cobra's own error printing.
func NewCommand(io IO) *cobra.Command {
	if io.Environ == nil {
		io.Environ = os.Environ
	}
	cmd := &cobra.Command{
		Use:   "runner",
		Short: "Run one CAPTF operation inside a module image (the entrypoint of every CAPTF Job)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCopyCommand(), newRunCommand(io), newStateKeyCommand())
	return cmd
}

func newCopyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "copy DEST",
		Short: "Copy this executable to DEST with mode 0755 (the Job's init container)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := copySelf(args[0]); err != nil {
				return &ExitError{Code: ExitFailed, Err: err}
			}
			return nil
		},
	}
}

// copySelf copies the running executable through a temporary file and a rename, so a reader
// never sees a half-written binary.
func copySelf(dest string) error {
	src, err := os.Executable()
	if err != nil {
		return fmt.Errorf("runner: locate own executable: %w", err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("runner: open own executable: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return fmt.Errorf("runner: create copy next to %s: %w", dest, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("runner: copy executable to %s: %w", dest, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("runner: write %s: %w", dest, err)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return fmt.Errorf("runner: make %s executable: %w", dest, err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("runner: move copy to %s: %w", dest, err)
	}
	return nil
}

// options are the flags of `runner run`.
type options struct {
	op               string
	bin              string
	module           string
	providers        string
	workdir          string
	config           string
	credentials      string
	image            string
	lockTimeout      time.Duration
	stopTimeout      time.Duration
	backendConfig    []string
	forceUnlock      string
	inputsHash       string
	expectPlan       string
	savedPlanChunks  int
	savedPlanDigest  string
	restoreChunks    int
	restoreResources int
	restoreDigest    string
	resultFile       string
	eventObject      string
	jobName          string
	secretEnv        []string
	stateEncryption  string
	stateKey         stateKeyFlags
	stateKeyHelper   string
	stateKeyCA       string
}

// maxRestoreChunks matches the state reader's bound: the backend never writes more chunks for
// a state the controller accepts.
const maxRestoreChunks = 32

func newRunCommand(io IO) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "run --op=OP [flags]",
		Short: "Run one operation (plan, apply, destroy, refresh, drift or restore) and write its result",
		Long: `Run one operation of a CAPTF object with the module image's runtime and write a result
document to --result-file. Exit codes: 0 success, 1 failure (the result's error.kind says which),
2 invalid flags. See docs/captf/runner.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// The command parses its own flags so that a flag error still produces a result
		// document at --result-file, wherever that flag stands: the controller must learn why
		// the Job failed.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.InitDefaultHelpFlag()
			if err := cmd.Flags().Parse(args); err != nil {
				o.resultFile = resultFileArg(args, o.resultFile)
				return usageFailure(io, o, err)
			}
			if help, _ := cmd.Flags().GetBool("help"); help {
				return cmd.Help()
			}
			if cmd.Flags().NArg() > 0 {
				return usageFailure(io, o, fmt.Errorf("unexpected arguments %q", cmd.Flags().Args()))
			}
			if err := o.validate(); err != nil {
				return usageFailure(io, o, err)
			}
			return o.execute(cmd.Context(), io)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.op, "op", "", "operation: plan, apply, destroy, refresh, drift or restore")
	f.StringVar(&o.bin, "bin", contract.RuntimePath, "the runtime binary (tofu or terraform)")
	f.StringVar(&o.module, "module", contract.ModuleDir, "the module directory; must be <workdir>/../module")
	f.StringVar(&o.providers, "providers", contract.ProvidersDir, "provider filesystem mirror, used when it exists")
	f.StringVar(&o.workdir, "workdir", contract.WorkDir, "writable work directory; the root module goes to <workdir>/root")
	f.StringVar(&o.config, "config", contract.ConfigDir, "directory with main.tf.json, terraform.tfvars.json and restore/<i>")
	f.StringVar(&o.credentials, "credentials", contract.CredentialsDir, "credentials directory; its values are redacted")
	f.StringVar(&o.image, "image", "", "the module image, recorded in the result")
	f.DurationVar(&o.lockTimeout, "lock-timeout", 60*time.Second, "how long to wait for the state lock")
	f.DurationVar(&o.stopTimeout, "stop-timeout", 570*time.Second, "after SIGTERM, how long the runtime may take to stop and the state to be saved")
	f.StringArrayVar(&o.backendConfig, "backend-config", nil, "kubernetes backend setting key=value (repeatable)")
	f.StringVar(&o.forceUnlock, "force-unlock", "", "lock ID of a stale state lock to remove after init")
	f.StringVar(&o.inputsHash, "inputs-hash", "", "apply: hash of the inputs this apply renders, named when the apply stops before a delete")
	f.StringVar(&o.expectPlan, "expect-plan", "", "apply: the approved plan's hash; apply the approved saved plan (--saved-plan-chunks) and nothing else")
	f.IntVar(&o.savedPlanChunks, "saved-plan-chunks", 0, "apply: number of chunk files <config>/saved-plan/<i> of the approved saved plan")
	f.StringVar(&o.savedPlanDigest, "saved-plan-digest", "", "apply: hex SHA-256 the saved plan's chunk files must have together, as the manager verified them")
	f.IntVar(&o.restoreChunks, "restore-chunks", 0, "restore: number of chunk files <config>/restore/<i>")
	f.IntVar(&o.restoreResources, "restore-resources", 0, "restore: managed resources the backup counted (0 skips the check)")
	f.StringVar(&o.restoreDigest, "restore-digest", "", "restore: hex SHA-256 the chunk files must have together, as the manager verified the backup")
	f.StringVar(&o.resultFile, "result-file", contract.TerminationLog, "where to write the result document")
	f.StringVar(&o.eventObject, "event-object", "", "post progress Events on this object: <apiVersion>/<kind>/<namespace>/<name>/<uid>")
	f.StringVar(&o.jobName, "job-name", "", "the Job running this operation, named in progress Events")
	f.StringArrayVar(&o.secretEnv, "secret-env", nil, "environment variable filled from a Secret; its value is redacted whatever its name (repeatable)")
	f.StringVar(&o.stateEncryption, "state-encryption", "", "encrypt: OpenTofu writes the state encrypted with the manager's key (a plain state is still read); decrypt: writes it plain (an encrypted one is still read); empty: no encryption")
	o.stateKey.register(cmd, "state-key-")
	f.StringVar(&o.stateKeyCA, "state-key-ca", "", "the certificate the endpoint must present, as PEM (instead of --state-key-ca-file)")
	f.StringVar(&o.stateKeyHelper, "state-key-helper", contract.RunnerPath, "the runner executable OpenTofu runs as its key provider (`runner state-key`)")
	return cmd
}

// resultFileArg finds the last --result-file in raw arguments that failed to parse.
func resultFileArg(args []string, def string) string {
	for i, a := range args {
		switch {
		case a == "--":
			return def
		case strings.HasPrefix(a, "--result-file="):
			def = strings.TrimPrefix(a, "--result-file=")
		case a == "--result-file" && i+1 < len(args):
			def = args[i+1]
		}
	}
	return def
}

func (o *options) validate() error {
	if o.op == "" {
		return errors.New("--op is required")
	}
	if !validOp(o.op) {
		return fmt.Errorf("--op=%q is not one of plan, apply, destroy, refresh, drift, restore", o.op)
	}
	for _, kv := range o.backendConfig {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("--backend-config=%q is not key=value", kv)
		}
	}
	if o.lockTimeout < 0 || o.stopTimeout <= 0 {
		return errors.New("--lock-timeout must not be negative and --stop-timeout must be positive")
	}
	if (o.expectPlan != "" || o.savedPlanChunks != 0 || o.savedPlanDigest != "") && o.op != contract.OpApply {
		return errors.New("--expect-plan, --saved-plan-chunks and --saved-plan-digest apply only to --op=apply")
	}
	if o.savedPlanChunks < 0 || o.savedPlanChunks > savedplan.MaxChunks {
		return fmt.Errorf("--saved-plan-chunks must be between 0 and %d", savedplan.MaxChunks)
	}
	if o.savedPlanChunks > 0 && (o.expectPlan == "" || o.savedPlanDigest == "") {
		return errors.New("--saved-plan-chunks needs --expect-plan (the approved plan) and --saved-plan-digest (what the manager verified)")
	}
	if o.op == contract.OpRestore && (o.restoreChunks < 1 || o.restoreChunks > maxRestoreChunks) {
		return fmt.Errorf("--op=restore needs --restore-chunks between 1 and %d", maxRestoreChunks)
	}
	if err := o.validateEncryption(); err != nil {
		return err
	}
	if o.restoreResources < 0 {
		return errors.New("--restore-resources must not be negative")
	}
	// The rendered root's module source is ../../module relative to <workdir>/root.
	want := filepath.Join(o.workdir, "..", "module")
	if filepath.Clean(o.module) != filepath.Clean(want) && !sameDir(o.module, want) {
		return fmt.Errorf("--module=%s must be %s: the root module in <workdir>/root calls source %q", o.module, want, contract.ModuleSource)
	}
	return nil
}

func sameDir(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// usageFailure writes the result of a run that never started and returns exit code 2.
func usageFailure(io IO, o *options, err error) error {
	res := runresult.Result{Version: runresult.Version, Op: knownOp(o.op), Image: o.image,
		Error: &runresult.Error{Kind: runresult.KindUsage, Summary: err.Error()}}
	fmt.Fprintf(io.Out, "captf-runner: invalid flags: %v\n", err)
	if werr := writeResult(o.resultFile, res); werr != nil {
		fmt.Fprintf(io.Out, "captf-runner: %v\n", werr)
	}
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf("runner: invalid flags: %w", err)}
}

// knownOp keeps an unknown --op value out of the result: Decode would reject the document.
func knownOp(op string) string {
	if validOp(op) {
		return op
	}
	return ""
}

func validOp(op string) bool {
	switch op {
	case contract.OpPlan, contract.OpApply, contract.OpDestroy, contract.OpRefresh, contract.OpDrift, contract.OpRestore:
		return true
	}
	return false
}

// writeResult encodes the bounded document and writes it; the kubelet reads the file when the
// container exits.
func writeResult(path string, res runresult.Result) error {
	b, err := runresult.Encode(res)
	if err != nil {
		return fmt.Errorf("runner: encode result: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("runner: write result to %s: %w", path, err)
	}
	return nil
}
