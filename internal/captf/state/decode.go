package state

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/statekey"
)

// Bounds on what Decode reads. Any module can write the state Secrets, so these are what keeps
// a hostile or broken module from making the manager allocate without limit.
const (
	// MaxChunks is the most state Secrets (base and -part-N) one state may span.
	MaxChunks = 32
	// MaxStateBytes is the most decompressed bytes one state may have (a gzip-bomb guard).
	MaxStateBytes = 64 << 20
	// MaxOutputsBytes is the most the root outputs may take together, as JSON. They are the
	// contract outputs, which end up in status: a pool of 1000 instances needs a fraction of
	// this. Outputs are the one part of a state the manager keeps after reading it.
	MaxOutputsBytes = 1 << 20
	// MaxValueBytes is the largest single value (a resource block with all its instances, any
	// other top-level field) the decoder holds at once. Everything but the outputs is
	// skipped or counted, but encoding/json holds a whole value while it does, so this, not
	// MaxStateBytes, is what one decode costs.
	MaxValueBytes = 16 << 20
)

// readAhead caps what one read hands the JSON decoder, so that the size of the value being
// decoded is known to within this much (see valueLimit).
const readAhead = 64 << 10

// Caps on the few strings copied out of a state: they end up in annotations and status.
const (
	maxLineageLen = 128
	maxVersionLen = 64
)

// maxPartIndexLen bounds the digits of a chunk index ("-part-999999999"), so a hostile name
// never reaches strconv with a number that could overflow; a longer one is no chunk of ours.
const maxPartIndexLen = 9

// Snapshot is what the controller needs to know about a readable state. It holds no resource
// attributes: only the root outputs, whose values are sensitive (see Output).
type Snapshot struct {
	// Namespace of the state Secrets.
	Namespace string
	// Suffix is the backend's secret_suffix.
	Suffix string
	// Serial increases with every write of the state.
	Serial int64
	// Lineage identifies the state's history; a restore must keep it.
	Lineage string
	// TerraformVersion is the version of OpenTofu or Terraform that wrote the state.
	TerraformVersion string
	// Outputs are the root module's outputs by name.
	Outputs map[string]Output
	// Resources counts managed resource blocks (see countResources).
	Resources int
	// Bytes is the compressed size of the chunks that hold the state.
	Bytes int64
	// DecompressedBytes is the size of the state JSON.
	DecompressedBytes int64
	// Encrypted is true for a state OpenTofu encrypted with the manager's key (statekey): the
	// facts above come from the plain state, decrypted in memory; the chunks (and so backups)
	// hold the ciphertext.
	Encrypted bool
	// Digest is the hex SHA-256 of the compressed chunks that hold the state, concatenated in
	// order: what a backup copies, and how two backups of one serial are told apart.
	Digest string
	// InputsHash is the captf.io/inputs-hash annotation of the base Secret: the inputs of the
	// newest successful apply or restore, "" if never adopted.
	InputsHash string
	// Image is the captf.io/applied-image annotation of the base Secret: the module image of the
	// newest successful apply, "" if none recorded one (a state applied before it was recorded).
	Image string
	// Labels are the base Secret's labels (the backend's and those passed with
	// -backend-config=labels=...).
	Labels map[string]string
	// Chunks names the Secrets that hold the state, in order.
	Chunks []string
	// StaleChunks names trailing -part-N Secrets past the end of the gzip stream: left behind
	// by a write that shrank the state (or by Terraform before a switch to OpenTofu, which
	// writes a single Secret). They are harmless and excluded from Bytes, Digest and backups.
	StaleChunks []string

	// data are the compressed chunks (shared with the Secrets read, not copied) for Backup.
	data [][]byte
}

// RetainedFrom returns the UID of the object that retained this state with deletionPolicy
// Retain, or "" if the state was not retained.
func (s *Snapshot) RetainedFrom() string { return s.Labels[captfv1.RetainedFromUIDLabel] }

// MarshalLog keeps output values out of structured logs (logr calls it).
func (s *Snapshot) MarshalLog() any {
	return map[string]any{
		"serial": s.Serial, "lineage": s.Lineage, "resources": s.Resources, "bytes": s.Bytes,
		"chunks": len(s.Chunks), "outputs": len(s.Outputs),
	}
}

// Output is one root module output. The generated root module marks every contract output
// sensitive, and a module's own outputs may carry credentials, so Value is never to be logged
// or put into an error: Output formats as a placeholder with fmt and logr.
type Output struct {
	// Value is the output's value as JSON ("null" when unknown or null).
	Value json.RawMessage
	// Type is the output's type in OpenTofu's JSON type syntax (e.g. "string" or
	// ["object",{...}]); nil in states that do not record it.
	Type json.RawMessage
	// Sensitive is the output's sensitive flag.
	Sensitive bool
}

// Format prints a placeholder for every verb, so %v, %+v and %#v of a Snapshot or an Output
// never show a value.
func (o Output) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "{Output redacted, %d bytes, sensitive=%t}", len(o.Value), o.Sensitive)
}

// MarshalLog keeps the value out of structured logs.
func (o Output) MarshalLog() any {
	return map[string]any{"bytes": len(o.Value), "sensitive": o.Sensitive}
}

// IsNull reports whether the output's value is null (declared but not known).
func (o Output) IsNull() bool {
	v := strings.TrimSpace(string(o.Value))
	return v == "" || v == "null"
}

// Decode reads a state from the Secrets that the backend's label selector returned for suffix.
// It never modifies the Secrets and keeps references to their data in the Snapshot. The error is
// an *Error whose Reason maps to the StateReadable condition: no Secrets at all is ErrNotFound;
// names that are not the suffix's base or -part-N, duplicates and gaps are ErrInconsistent; an
// encrypted state is ErrEncrypted (checked before the version, which an encrypted state does
// not carry); everything else that does not read is ErrCorrupt.
func Decode(secrets []corev1.Secret, suffix string) (*Snapshot, error) {
	return DecodeWith(secrets, suffix, nil)
}

// DecodeWith is Decode that also reads a state encrypted with master's key for it (see
// package statekey): decrypted in memory, never written anywhere. An encrypted state that
// master does not open is ErrEncrypted, with a message saying why (another master key,
// another object's key, damaged ciphertext) and what to do. A nil master reads plain states
// only, as Decode.
func DecodeWith(secrets []corev1.Secret, suffix string, master *statekey.Master) (*Snapshot, error) {
	base := contract.StateSecretName(suffix)
	chunks, err := orderChunks(secrets, base)
	if err != nil {
		return nil, err
	}
	data := make([][]byte, len(chunks))
	for i, s := range chunks {
		data[i] = s.Data[contract.BackendStateKey]
		if len(data[i]) > 0 {
			continue
		}
		if len(chunks) == 1 {
			// The backend creates the Secret, then writes the state into it: a run that died
			// in between left no state.
			return nil, newError(captfv1.StateNotFoundReason, base,
				fmt.Sprintf("Secret %s holds no state yet (its %q key is empty); the next apply writes it", base, contract.BackendStateKey))
		}
		return nil, newError(captfv1.StateInconsistentReason, base,
			fmt.Sprintf("chunk %s has no %q data; restore a backup with the %s annotation or delete the empty chunk if the others hold a whole state",
				s.Name, contract.BackendStateKey, captfv1.RestoreStateAnnotation))
	}

	in := &chunkReader{chunks: data}
	facts, err := readState(in)
	if err != nil {
		return nil, corruptError(base, err)
	}
	if facts.encrypted && master != nil {
		if facts, err = decryptState(data, chunks[0].Namespace, suffix, master); err != nil {
			return nil, err
		}
	}
	if err := facts.check(base); err != nil {
		return nil, err
	}

	used := in.chunksUsed()
	snap := &Snapshot{
		Namespace:         chunks[0].Namespace,
		Suffix:            suffix,
		Serial:            facts.serial,
		Lineage:           facts.lineage,
		TerraformVersion:  facts.terraformVersion,
		Outputs:           facts.outputs,
		Resources:         facts.resources,
		Encrypted:         facts.decrypted,
		DecompressedBytes: facts.size,
		InputsHash:        chunks[0].Annotations[captfv1.InputsHashAnnotation],
		Image:             chunks[0].Annotations[captfv1.AppliedImageAnnotation],
		Labels:            chunks[0].Labels,
		data:              data[:used],
	}
	sum := sha256.New()
	for i, s := range chunks {
		if i >= used {
			snap.StaleChunks = append(snap.StaleChunks, s.Name)
			continue
		}
		snap.Chunks = append(snap.Chunks, s.Name)
		snap.Bytes += int64(len(data[i]))
		sum.Write(data[i])
	}
	snap.Digest = hex.EncodeToString(sum.Sum(nil))
	if snap.Outputs == nil {
		snap.Outputs = map[string]Output{}
	}
	return snap, nil
}

// ChunkIndex returns the chunk index of a state Secret name for a base name: 0 for the base
// itself, N for "<base>-part-N" (N >= 1, written without leading zeros as the backend does).
func ChunkIndex(name, base string) (int, bool) {
	if name == base {
		return 0, true
	}
	digits, ok := strings.CutPrefix(name, base+contract.StateChunkInfix)
	if !ok || digits == "" || len(digits) > maxPartIndexLen || digits[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 {
		return 0, false
	}
	return n, true
}

// ChunkName is the name of chunk i of a base name.
func ChunkName(base string, i int) string {
	if i == 0 {
		return base
	}
	return base + contract.StateChunkInfix + strconv.Itoa(i)
}

// orderChunks checks the names of the Secrets the selector returned and orders them by chunk.
func orderChunks(secrets []corev1.Secret, base string) ([]*corev1.Secret, error) {
	if len(secrets) == 0 {
		return nil, newError(captfv1.StateNotFoundReason, base,
			fmt.Sprintf("no Secret %s with the backend's labels exists yet; the first apply creates it", base))
	}
	type indexed struct {
		i int
		s *corev1.Secret
	}
	found := make([]indexed, 0, len(secrets))
	for k := range secrets {
		s := &secrets[k]
		i, ok := ChunkIndex(s.Name, base)
		if !ok {
			return nil, newError(captfv1.StateInconsistentReason, base,
				fmt.Sprintf("Secret %s carries the backend's labels for this state but is not one of its chunks (%s or %s%sN); delete it or remove its %s label",
					s.Name, base, base, contract.StateChunkInfix, contract.BackendSuffixLabel))
		}
		found = append(found, indexed{i, s})
	}
	slices.SortFunc(found, func(a, b indexed) int { return a.i - b.i })
	for k := 1; k < len(found); k++ {
		if found[k].i == found[k-1].i {
			return nil, newError(captfv1.StateInconsistentReason, base,
				fmt.Sprintf("chunk %s appears twice in the list of state Secrets", found[k].s.Name))
		}
	}
	if len(found) > MaxChunks {
		return nil, newError(captfv1.StateCorruptReason, base,
			fmt.Sprintf("the state spans %d Secrets, more than the %d CAPTF reads; restore a backup with the %s annotation",
				len(found), MaxChunks, captfv1.RestoreStateAnnotation))
	}
	out := make([]*corev1.Secret, len(found))
	for k, f := range found {
		if f.i != k {
			missing := ChunkName(base, k)
			return nil, newError(captfv1.StateInconsistentReason, base,
				fmt.Sprintf("chunk %s is missing while %s exists; restore a backup with the %s annotation, or delete the chunks after the gap if they are left over from an older, larger state",
					missing, f.s.Name, captfv1.RestoreStateAnnotation))
		}
		out[k] = f.s
	}
	return out, nil
}

// stateFacts is what readState collects; check turns it into a verdict.
type stateFacts struct {
	encrypted        bool
	decrypted        bool // read from the plain state inside an encrypted one
	version          json.RawMessage
	serial           int64
	hasSerial        bool
	lineage          string
	terraformVersion string
	outputs          map[string]Output
	resources        int
	size             int64
	// shape is the first field with the wrong JSON type; reading goes on so that an encrypted
	// state is still recognised whatever else it holds.
	shape string
	// limit bounds the value being decoded.
	limit *valueLimit
}

func (f *stateFacts) check(base string) error {
	if f.encrypted {
		return newError(captfv1.StateEncryptedReason, base,
			"the state is encrypted with OpenTofu state encryption and this reader holds no key for it: only the manager reads encrypted states (its key provider, docs/captf/state.md); a state encrypted by the module's own encryption block is not readable by CAPTF")
	}
	if f.version == nil {
		return newError(captfv1.StateCorruptReason, base,
			"the data has no \"version\" field, so it is not an OpenTofu/Terraform state; restore a backup with the "+captfv1.RestoreStateAnnotation+" annotation")
	}
	if v := string(f.version); v != "4" {
		shown := "that is not a number"
		if _, err := strconv.ParseUint(v, 10, 32); err == nil {
			shown = v
		}
		return newError(captfv1.StateCorruptReason, base,
			fmt.Sprintf("state version %s is not supported: CAPTF reads state version 4 (OpenTofu, and Terraform 0.12 or later); upgrade the state with a current OpenTofu (tofu state pull, then tofu state push) or restore a backup", shown))
	}
	if f.shape != "" {
		return newError(captfv1.StateCorruptReason, base,
			fmt.Sprintf("the state's %s; restore a backup with the %s annotation", f.shape, captfv1.RestoreStateAnnotation))
	}
	if !f.hasSerial || f.lineage == "" {
		return newError(captfv1.StateCorruptReason, base,
			"the state has no serial or no lineage; restore a backup with the "+captfv1.RestoreStateAnnotation+" annotation")
	}
	return nil
}

// errTooLarge stops decompression at MaxStateBytes.
var errTooLarge = errors.New("decompressed state exceeds the size limit")

// errGzip marks errors of the compressed stream, to tell them from errors of the JSON in it.
type errGzip struct{ err error }

func (e errGzip) Error() string { return e.err.Error() }
func (e errGzip) Unwrap() error { return e.err }

// errShape is a state that is JSON but not shaped like a state at the top level.
type errShape string

func (e errShape) Error() string { return string(e) }

func corruptError(base string, err error) error {
	var (
		gz     errGzip
		syntax *json.SyntaxError
		shape  errShape
		msg    string
	)
	var big *valueTooLarge
	switch {
	case errors.As(err, &big) && big.field == "outputs":
		msg = fmt.Sprintf("the state's outputs take more than %d KiB together, the most CAPTF reads: they are the contract outputs, which go into status and must stay small; fix the module and restore a backup with the %s annotation",
			MaxOutputsBytes>>10, captfv1.RestoreStateAnnotation)
	case errors.As(err, &big):
		msg = fmt.Sprintf("a single value of the state's field %q is larger than %d MiB, the most CAPTF reads at once; restore a backup with the %s annotation",
			big.field, MaxValueBytes>>20, captfv1.RestoreStateAnnotation)
	case errors.Is(err, errTooLarge):
		msg = fmt.Sprintf("the state decompresses to more than %d MiB, the most CAPTF reads (a guard against gzip bombs); restore a backup with the %s annotation",
			MaxStateBytes>>20, captfv1.RestoreStateAnnotation)
	case errors.As(err, &gz):
		// gzip's and flate's messages name offsets and checksums, never data.
		msg = fmt.Sprintf("the chunks do not decompress as one gzip stream (%v); a chunk may be missing, truncated or overwritten; restore a backup with the %s annotation",
			gz.err, captfv1.RestoreStateAnnotation)
	case errors.As(err, &syntax):
		// SyntaxError's own message quotes the offending character; keep only the offset.
		msg = fmt.Sprintf("the decompressed state is not valid JSON (at byte %d); restore a backup with the %s annotation",
			syntax.Offset, captfv1.RestoreStateAnnotation)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		msg = "the decompressed state ends in the middle of its JSON; restore a backup with the " + captfv1.RestoreStateAnnotation + " annotation"
	case errors.As(err, &shape):
		msg = string(shape) + "; restore a backup with the " + captfv1.RestoreStateAnnotation + " annotation"
	default:
		msg = "the state does not decode; restore a backup with the " + captfv1.RestoreStateAnnotation + " annotation"
	}
	return newError(captfv1.StateCorruptReason, base, msg)
}

// decryptState reads the encrypted state in the chunks with master: the envelope (bounded by
// MaxStateBytes, as a plain state is), the plain state decrypted in memory and read as a plain
// state is, and the clear serial and lineage checked against the plain state's, as OpenTofu
// checks them.
func decryptState(data [][]byte, namespace, suffix string, master *statekey.Master) (*stateFacts, error) {
	base := contract.StateSecretName(suffix)
	encrypted := func(msg string) error { return newError(captfv1.StateEncryptedReason, base, msg) }
	gz, err := gzip.NewReader(&chunkReader{chunks: data})
	if err != nil {
		return nil, corruptError(base, errGzip{err})
	}
	gz.Multistream(false)
	doc, err := io.ReadAll(&boundedReader{r: gz, left: MaxStateBytes})
	if err != nil {
		return nil, corruptError(base, err)
	}
	env, err := statekey.ParseEnvelope(doc)
	if err != nil {
		return nil, encrypted(err.Error() + "; restore a backup with the " + captfv1.RestoreStateAnnotation + " annotation")
	}
	plain, err := env.Decrypt(master, namespace, suffix)
	if err != nil {
		return nil, encrypted(err.Error())
	}
	in := &boundedReader{r: bytes.NewReader(plain), left: MaxStateBytes}
	facts, err := readDoc(in)
	if err != nil {
		return nil, corruptError(base, err)
	}
	if facts.encrypted {
		return nil, encrypted("the decrypted state is itself encrypted; restore a backup with the " + captfv1.RestoreStateAnnotation + " annotation")
	}
	if (env.Serial != nil && *env.Serial != facts.serial) || (env.Lineage != "" && env.Lineage != facts.lineage) {
		return nil, encrypted("the serial or lineage in the clear differs from the encrypted state's own (the Secret was edited); restore a backup with the " + captfv1.RestoreStateAnnotation + " annotation")
	}
	facts.decrypted = true
	return facts, nil
}

// readState streams the state JSON out of the compressed chunks. Only the top-level object is
// walked token by token; each field is decoded (or skipped) on its own and the resources list
// one resource at a time, so the decoder's buffer holds one value, never the whole state.
func readState(compressed io.Reader) (*stateFacts, error) {
	gz, err := gzip.NewReader(compressed)
	if err != nil {
		return nil, errGzip{err}
	}
	gz.Multistream(false) // bytes past the first gzip member belong to stale chunks
	return readDoc(&boundedReader{r: gz, left: MaxStateBytes})
}

// readDoc reads the facts of a state JSON document.
func readDoc(in *boundedReader) (*stateFacts, error) {
	f := &stateFacts{limit: &valueLimit{r: &spaceReader{r: in}}}
	f.limit.start("", MaxValueBytes)
	if err := f.readObject(json.NewDecoder(f.limit)); err != nil {
		// Damaged deflate data often decompresses to garbage before a check fails: if the
		// rest of the stream is damaged too, that is the better explanation.
		var gzErr errGzip
		if !errors.As(err, &gzErr) && !errors.Is(err, errTooLarge) {
			if _, derr := io.Copy(io.Discard, in); derr != nil {
				return nil, derr
			}
		}
		return nil, err
	}
	// Reading to the end verifies the gzip checksum and applies the size bound to whatever
	// trails the object.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return nil, err
	}
	f.size = in.read
	return f, nil
}

// readObject reads the top-level object field by field.
func (f *stateFacts) readObject(dec *json.Decoder) error {
	if err := expectDelim(dec, '{', "the decompressed data is not a JSON object"); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		f.limit.start(key, MaxValueBytes)
		if key == "outputs" {
			f.limit.start(key, MaxOutputsBytes)
		}
		if err := f.readField(dec, key); err != nil {
			var typeErr *json.UnmarshalTypeError
			if !errors.As(err, &typeErr) {
				return err
			}
			f.setShape(fmt.Sprintf("field %q has the wrong JSON type", fieldPath(key, typeErr.Field)))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return err
	}
	// Only whitespace may follow.
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return err
		}
		return errShape(fmt.Sprintf("the decompressed state has data after its JSON object (%T)", tok))
	}
	return nil
}

func (f *stateFacts) readField(dec *json.Decoder, key string) error {
	switch key {
	case "encryption_version", "encrypted_data":
		// OpenTofu's encrypted payload: {"meta":..., "encrypted_data":..., "encryption_version":...}.
		f.encrypted = true
		return skipValue(dec)
	case "version":
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		f.version = raw
		return nil
	case "serial":
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n < 0 {
			f.setShape(`field "serial" is not a whole number`)
			return nil
		}
		f.serial, f.hasSerial = n, true
		return nil
	case "lineage":
		return f.readString(dec, key, &f.lineage, maxLineageLen)
	case "terraform_version":
		return f.readString(dec, key, &f.terraformVersion, maxVersionLen)
	case "outputs":
		var outs map[string]struct {
			Value     json.RawMessage `json:"value"`
			Type      json.RawMessage `json:"type"`
			Sensitive bool            `json:"sensitive"`
		}
		from := dec.InputOffset()
		if err := dec.Decode(&outs); err != nil {
			return err
		}
		if dec.InputOffset()-from > MaxOutputsBytes {
			return &valueTooLarge{field: key}
		}
		f.outputs = make(map[string]Output, len(outs))
		for name, o := range outs {
			if o.Value == nil {
				o.Value = json.RawMessage("null")
			}
			f.outputs[name] = Output{Value: o.Value, Type: o.Type, Sensitive: o.Sensitive}
		}
		return nil
	case "resources":
		return f.countResources(dec)
	}
	return skipValue(dec)
}

func (f *stateFacts) readString(dec *json.Decoder, key string, dst *string, limit int) error {
	var s *string
	if err := dec.Decode(&s); err != nil {
		return err
	}
	if s == nil {
		return nil
	}
	if len(*s) > limit {
		f.setShape(fmt.Sprintf("field %q is longer than %d bytes", key, limit))
		return nil
	}
	*dst = *s
	return nil
}

func (f *stateFacts) setShape(msg string) {
	if f.shape == "" {
		f.shape = msg
	}
}

// countResources counts the managed resource blocks of the state: entries of "resources" with
// mode "managed" (data sources are not infrastructure). A block with count or for_each counts
// once, however many instances it has: that is what the CAPTF anchor reports (so numbers in
// status.stateBackups agree), it does not change when a pool's count is scaled, and it lets
// the decoder skip each block's instances without walking them. A block in each instance of a
// module is its own entry, so it counts once per module instance.
func (f *stateFacts) countResources(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		return nil
	case json.Delim('['):
	default:
		if err := skipRest(dec, tok); err != nil {
			return err
		}
		f.setShape(`field "resources" is not a list`)
		return nil
	}
	for dec.More() {
		f.limit.start("resources", MaxValueBytes)
		var block struct {
			Mode string `json:"mode"`
		}
		if err := dec.Decode(&block); err != nil {
			var typeErr *json.UnmarshalTypeError
			if !errors.As(err, &typeErr) {
				return err
			}
			f.setShape(`field "resources" holds an entry that is not a resource`)
			continue
		}
		if block.Mode == "managed" {
			f.resources++
		}
	}
	_, err = dec.Token() // the closing bracket
	return err
}

// skipped discards a JSON value without building it.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

func skipValue(dec *json.Decoder) error { return dec.Decode(&skipped{}) }

// skipRest skips what remains of a value whose first token was already read.
func skipRest(dec *json.Decoder, first json.Token) error {
	depth := 0
	if d, ok := first.(json.Delim); ok && (d == '{' || d == '[') {
		depth = 1
	}
	for depth > 0 {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func expectDelim(dec *json.Decoder, want json.Delim, msg string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return errShape(msg)
	}
	return nil
}

func fieldPath(key, field string) string {
	if field == "" {
		return key
	}
	return key + "." + field
}

// chunkReader reads the chunks as one stream. It is an io.ByteReader, so gzip reads from it
// directly instead of through a read-ahead buffer, and the count of bytes consumed tells where
// the gzip member ended, and so which trailing chunks are stale.
type chunkReader struct {
	chunks   [][]byte
	i, off   int
	consumed int64
}

func (r *chunkReader) next() bool {
	for r.i < len(r.chunks) && r.off == len(r.chunks[r.i]) {
		r.i++
		r.off = 0
	}
	return r.i < len(r.chunks)
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if !r.next() {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[r.i][r.off:])
	r.off += n
	r.consumed += int64(n)
	return n, nil
}

func (r *chunkReader) ReadByte() (byte, error) {
	if !r.next() {
		return 0, io.EOF
	}
	b := r.chunks[r.i][r.off]
	r.off++
	r.consumed++
	return b, nil
}

// chunksUsed is the number of leading chunks that hold consumed bytes.
func (r *chunkReader) chunksUsed() int {
	left := r.consumed
	for i, c := range r.chunks {
		left -= int64(len(c))
		if left <= 0 {
			return i + 1
		}
	}
	return len(r.chunks)
}

// spaceReader collapses every run of whitespace outside JSON strings into one space. The
// json.Decoder rescans its whole buffer of pending whitespace on every refill while it looks
// for the next token, so a long run (64 MiB of spaces is valid JSON) would cost quadratic time;
// one space keeps tokens apart exactly as before, so the JSON means the same.
type spaceReader struct {
	r                 io.Reader
	inString, escaped bool
	space             bool
}

func (s *spaceReader) Read(p []byte) (int, error) {
	for {
		n, err := s.r.Read(p)
		out := 0
		for _, c := range p[:n] {
			switch {
			case s.inString:
				switch {
				case s.escaped:
					s.escaped = false
				case c == '\\':
					s.escaped = true
				case c == '"':
					s.inString = false
				}
			case c == ' ' || c == '\t' || c == '\n' || c == '\r':
				if s.space {
					continue
				}
				s.space = true
				c = ' '
			default:
				s.space = false
				s.inString = c == '"'
			}
			p[out] = c
			out++
		}
		if out > 0 || err != nil {
			return out, err
		}
	}
}

// valueTooLarge: a value exceeded its bound (see valueLimit).
type valueTooLarge struct{ field string }

func (e *valueTooLarge) Error() string { return "value of field " + e.field + " too large" }

// valueLimit bounds how much the JSON decoder reads for one value: start sets the bound before
// a value is decoded; reading more than that (plus readAhead, what the decoder may have read
// ahead) before the next start fails. Each read is capped at readAhead, so the decoder never
// holds much more than the value it decodes. (The outputs are also measured exactly once
// decoded.)
type valueLimit struct {
	r     io.Reader
	field string
	left  int64
}

func (l *valueLimit) start(field string, limit int64) { l.field, l.left = field, limit+readAhead }

func (l *valueLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, &valueTooLarge{field: l.field}
	}
	if len(p) > readAhead {
		p = p[:readAhead]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// boundedReader fails once more than left bytes come out of r, and tags r's errors as gzip
// errors.
type boundedReader struct {
	r    io.Reader
	left int64
	read int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	b.read += int64(n)
	if b.left < 0 {
		return 0, errTooLarge
	}
	if err != nil && err != io.EOF {
		err = errGzip{err}
	}
	return n, err
}

// Compact returns a copy of the snapshot without the chunk data and the output values: what a
// cache may keep of it. A compact snapshot cannot be backed up (Backup needs the data).
func (s *Snapshot) Compact() *Snapshot {
	c := *s
	c.data, c.Outputs = nil, nil
	return &c
}

// Compacted reports a snapshot returned by Compact.
func (s *Snapshot) Compacted() bool { return s.data == nil }
