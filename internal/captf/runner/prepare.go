package runner

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/planhash"
	"github.com/capx-io/capx/internal/captf/savedplan"
)

// Files the runner writes under --workdir.
const (
	cliConfigFile    = "cli.tfrc"
	dataDirName      = ".terraform"
	restoreFile      = "restore.tfstate"
	erroredState     = "errored.tfstate" // what the runtime leaves in its working dir when it cannot save state
	planFileApply    = "apply.tfplan"
	planFileReview   = "plan.tfplan"
	planFileRefresh  = "refresh.tfplan"
	planFileApproved = "approved.tfplan" // the approved saved plan an approved apply applies
)

// Bounds on what the runner reads; any module can write Secrets, so nothing is trusted to be small.
const (
	maxConfigFileBytes = 2 << 20 // the durable inputs Secret's budget is 1,000,000 bytes
	maxCredentialBytes = 1 << 20
	maxStateBytes      = 64 << 20 // the state reader's gzip-bomb bound
)

// preflight checks the image contract: a module directory with at least one configuration file
// at its top level and an executable runtime.
func (o *options) preflight() error {
	entries, err := os.ReadDir(o.module)
	if err != nil {
		return fmt.Errorf("runner: read module directory %s (the image must contain the module at %s): %w", o.module, contract.ModuleDir, err)
	}
	found := false
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && (strings.HasSuffix(n, ".tf") || strings.HasSuffix(n, ".tf.json") || strings.HasSuffix(n, ".tofu") || strings.HasSuffix(n, ".tofu.json")) {
			found = true
			break
		}
	}
	if !found {
		return fmt.Errorf("runner: module directory %s has no .tf, .tf.json, .tofu or .tofu.json file at its top level", o.module)
	}
	st, err := os.Stat(o.bin)
	if err != nil {
		return fmt.Errorf("runner: find runtime %s (the image must contain tofu or terraform at %s): %w", o.bin, contract.RuntimePath, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("runner: runtime %s is not an executable file (mode %s)", o.bin, st.Mode())
	}
	return nil
}

// prepareWorkdir copies the rendered root module into <workdir>/root and writes the CLI
// configuration. It returns the root directory.
func (o *options) prepareWorkdir() (string, error) {
	root := filepath.Join(o.workdir, contract.RootDirName)
	if err := os.RemoveAll(root); err != nil {
		return "", fmt.Errorf("runner: clear %s: %w", root, err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("runner: create %s: %w", root, err)
	}
	for _, name := range []string{contract.RootModuleFile, contract.VarsFile} {
		b, err := readBounded(filepath.Join(o.config, name), maxConfigFileBytes)
		if err != nil {
			return "", fmt.Errorf("runner: read rendered %s from %s: %w", name, o.config, err)
		}
		if err := os.WriteFile(filepath.Join(root, name), b, 0o600); err != nil {
			return "", fmt.Errorf("runner: write %s: %w", name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(o.workdir, cliConfigFile), []byte(o.cliConfig()), 0o600); err != nil {
		return "", fmt.Errorf("runner: write CLI configuration: %w", err)
	}
	return root, nil
}

// cliConfig installs providers only from the image's mirror when it has one, so init never
// reaches for a registry the pod may not be allowed to contact.
func (o *options) cliConfig() string {
	c := "disable_checkpoint = true\n"
	if st, err := os.Stat(o.providers); err == nil && st.IsDir() {
		c += fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path = %s\n  }\n}\n", strconv.Quote(o.providers))
	}
	return c
}

// childEnv is the runtime's environment: the runner's own without TF_* and KUBE_* variables (a
// user's TF_VAR_, TF_CLI_ARGS or KUBE_CONFIG_PATH would change what runs or where state goes;
// the backend gets its settings only from --backend-config), with HOME and TF_DATA_DIR inside
// the work directory and the CLI configuration from prepareWorkdir. terraform-exec itself sets
// TF_IN_AUTOMATION=1 and passes -input=false to every command that could prompt; it refuses
// TF_INPUT in a custom environment, so TF_INPUT=0 is set only for commands the runner starts
// itself (state list).
func (o *options) childEnv(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if k == "" || strings.HasPrefix(k, "TF_") || strings.HasPrefix(k, "KUBE_") {
			continue
		}
		env[k] = v
	}
	env["HOME"] = o.workdir
	env["TF_DATA_DIR"] = filepath.Join(o.workdir, dataDirName)
	env["TF_CLI_CONFIG_FILE"] = filepath.Join(o.workdir, cliConfigFile)
	env["CHECKPOINT_DISABLE"] = "1"
	return env
}

// credentialName matches environment variables whose values are redacted even when the
// credentials directory does not name them.
var credentialName = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSWORD|PASSWD|PRIVATE|CREDENTIAL|API_?KEY|ACCESS_?KEY)`)

// collectSecrets registers what must never reach the log or the result: every file in the
// credentials directory, the environment variables of the same names (the Job mirrors the
// credentials Secret into both), filled from a Secret (--secret-env) or with credential-like
// names, and the values of root variables the rendered root module declares sensitive.
func (o *options) collectSecrets(red *redactor, environ []string) error {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
			if credentialName.MatchString(k) {
				red.Add(v)
			}
		}
	}
	for _, name := range o.secretEnv {
		red.Add(env[name])
	}
	entries, err := os.ReadDir(o.credentials)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("runner: read credentials directory %s: %w", o.credentials, err)
	}
	for _, e := range entries {
		// Secret volumes keep their data behind ..data and ..<timestamp> folders.
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(o.credentials, e.Name())
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		b, err := readBounded(p, maxCredentialBytes)
		if err != nil {
			return fmt.Errorf("runner: read credential %s: %w", e.Name(), err)
		}
		red.Add(string(b))
		if v, ok := env[e.Name()]; ok {
			red.Add(v)
		}
	}
	return o.collectSensitiveVariables(red)
}

func (o *options) collectSensitiveVariables(red *redactor) error {
	var root struct {
		Variable map[string]struct {
			Sensitive bool `json:"sensitive"`
		} `json:"variable"`
	}
	if err := decodeFile(filepath.Join(o.config, contract.RootModuleFile), &root); err != nil {
		return err
	}
	var vars map[string]any
	if err := decodeFile(filepath.Join(o.config, contract.VarsFile), &vars); err != nil {
		return err
	}
	for name, v := range root.Variable {
		if v.Sensitive {
			red.AddValue(vars[name])
		}
	}
	return nil
}

func decodeFile(path string, v any) error {
	b, err := readBounded(path, maxConfigFileBytes)
	if err != nil {
		return fmt.Errorf("runner: read %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("runner: parse %s: %w", filepath.Base(path), err)
	}
	return nil
}

// approvedPlan is the approved saved plan of an approved apply.
type approvedPlan struct {
	path string       // the plan file, written under --workdir
	plan *tfjson.Plan // its show -json document, as the manager hashed it
}

// assembleSavedPlan reads the approved saved plan from the chunk files
// <config>/saved-plan/0..N-1, checks they are the bytes the manager verified against the
// approved hash (--saved-plan-digest: the Secrets may have been replaced since), and writes the
// plan file to <workdir>/approved.tfplan. Without --saved-plan-chunks it returns nil.
func (o *options) assembleSavedPlan() (*approvedPlan, error) {
	if o.savedPlanChunks == 0 {
		return nil, nil
	}
	chunks := make([][]byte, o.savedPlanChunks)
	for i := range chunks {
		b, err := readBounded(filepath.Join(o.config, contract.SavedPlanDir, strconv.Itoa(i)), savedplan.MaxChunkBytes)
		if err != nil {
			return nil, fmt.Errorf("runner: read saved plan chunk %d: %w", i, err)
		}
		chunks[i] = b
	}
	b, digest, err := savedplan.DecodeChunks(chunks)
	if err != nil {
		return nil, fmt.Errorf("runner: read the approved saved plan: %w", err)
	}
	if digest != o.savedPlanDigest {
		return nil, fmt.Errorf("runner: the saved plan's chunks have digest %s, not the %s the manager verified: a saved plan Secret changed since; nothing was applied", digest, o.savedPlanDigest)
	}
	plan, err := planhash.Parse(b.Plan)
	if err != nil {
		return nil, fmt.Errorf("runner: read the approved saved plan: %w", err)
	}
	path := filepath.Join(o.workdir, planFileApproved)
	if err := os.WriteFile(path, b.PlanFile, 0o600); err != nil {
		return nil, fmt.Errorf("runner: write the approved plan file: %w", err)
	}
	return &approvedPlan{path: path, plan: plan}, nil
}

// assembleRestore rebuilds the backup's state from the chunk files <config>/restore/0..N-1:
// each holds one chunk Secret's "tfstate" bytes; concatenated in index order they are one gzip
// stream of the state JSON. A stale trailing chunk (left by a shrinking write) is ignored, as
// the backend does, by reading a single gzip member. It checks the state is an unencrypted
// version 4 state and writes it to <workdir>/restore.tfstate.
func (o *options) assembleRestore() (string, error) {
	var gz bytes.Buffer
	for i := range o.restoreChunks {
		p := filepath.Join(o.config, contract.RestoreDir, strconv.Itoa(i))
		b, err := readBounded(p, maxStateBytes-gz.Len())
		if err != nil {
			return "", fmt.Errorf("runner: read restore chunk %d: %w", i, err)
		}
		gz.Write(b)
	}
	zr, err := gzip.NewReader(&gz)
	if err != nil {
		return "", fmt.Errorf("runner: decompress restored state: %w", err)
	}
	zr.Multistream(false)
	state, err := io.ReadAll(io.LimitReader(zr, maxStateBytes+1))
	if err != nil {
		return "", fmt.Errorf("runner: decompress restored state: %w", err)
	}
	if len(state) > maxStateBytes {
		return "", fmt.Errorf("runner: restored state is larger than %d bytes decompressed", maxStateBytes)
	}
	var head struct {
		Version           *int            `json:"version"`
		Lineage           string          `json:"lineage"`
		EncryptionVersion json.RawMessage `json:"encryption_version"`
	}
	if err := json.Unmarshal(state, &head); err != nil {
		return "", fmt.Errorf("runner: restored state is not JSON: %w", err)
	}
	switch {
	case head.EncryptionVersion != nil && o.stateEncryption == "":
		return "", errors.New("runner: restored state is encrypted, and this Job has no state key (--state-encryption): turn state encryption on for the object to restore it")
	case head.EncryptionVersion != nil:
		// Decrypted in memory by the restore step (restorePlain); the file keeps the ciphertext.
	case head.Version == nil || *head.Version != 4:
		return "", errors.New("runner: restored state is not a version 4 state")
	case head.Lineage == "":
		return "", errors.New("runner: restored state has no lineage")
	}
	p := filepath.Join(o.workdir, restoreFile)
	if err := os.WriteFile(p, state, 0o600); err != nil {
		return "", fmt.Errorf("runner: write %s: %w", p, err)
	}
	return p, nil
}

// readBounded reads a file, failing when it is larger than limit.
func readBounded(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
