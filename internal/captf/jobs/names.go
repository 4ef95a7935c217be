package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// MaxNameLength bounds Job names. The Job controller names a Pod <job>-<5 random characters>
// and the kubelet cuts a Pod's hostname at 63 characters; at 57 the hostname is the whole Pod
// name, so the state lock's Who field ("<user>@<hostname>") names the runner Pod exactly and
// ParseHolder can tell our runs from anyone else's.
const MaxNameLength = 57

const (
	namePrefix   = "captf-"
	hashLength   = 6
	podSuffixLen = 5
)

// ops are the operations a Job name may carry.
var ops = map[string]bool{
	contract.OpPlan: true, contract.OpApply: true, contract.OpDestroy: true, contract.OpRefresh: true,
	contract.OpDrift: true, contract.OpRestore: true,
}

// Name is the Job name of one operation of an object: captf-<kindshort>-<name>-<op>-a<attempt>-<hash6>.
// hash6 is the start of sha256 over the inputs hash, op and attempt, each followed by a newline,
// so the same inputs and attempt always give the same name: a pass that crashed after creating
// the Job finds it again instead of starting a second one. Above MaxNameLength the object name
// is replaced by 16 hex characters of its sha256.
func Name(kind, name, op string, attempt int, inputsHash string) string {
	sum := sha256.Sum256([]byte(inputsHash + "\n" + op + "\n" + strconv.Itoa(attempt) + "\n"))
	n := JobName{KindShort: contract.KindShort(kind), Name: name, Op: op, Attempt: attempt, Hash: hex.EncodeToString(sum[:])[:hashLength]}
	if s := n.String(); len(s) <= MaxNameLength {
		return s
	}
	n.Name = hash16(name)
	return n.String()
}

// RunSecretName is the per-run Secret of a Job: its rendered inputs, mounted at contract.ConfigDir.
func RunSecretName(jobName string) string { return "captf-run-" + jobName }

// JobName is a Job name taken apart by ParseName.
type JobName struct {
	// KindShort is c, m or mp.
	KindShort string
	// Name is the object's name, or 16 hex characters of its sha256 when the name was too long.
	Name string
	// Op is the operation.
	Op string
	// Attempt is the attempt number.
	Attempt int
	// Hash is the 6 hex characters that end the name.
	Hash string
}

// String is the Job name.
func (n JobName) String() string {
	return namePrefix + n.KindShort + "-" + n.Name + "-" + n.Op + "-a" + strconv.Itoa(n.Attempt) + "-" + n.Hash
}

// IsFor reports whether the Job name belongs to the object of kind and name.
func (n JobName) IsFor(kind, name string) bool {
	return n.KindShort == contract.KindShort(kind) && (n.Name == name || n.Name == hash16(name))
}

// ParseName takes a Job name apart; ok is false when s is not a name Name returns. It reads
// from the right, because object names may contain every separator the format uses.
func ParseName(s string) (n JobName, ok bool) {
	rest, found := strings.CutPrefix(s, namePrefix)
	if !found || len(s) > MaxNameLength {
		return JobName{}, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i < 0 || !isHex(rest[i+1:], hashLength) {
		return JobName{}, false
	}
	n.Hash, rest = rest[i+1:], rest[:i]
	if i = strings.LastIndex(rest, "-a"); i < 0 || !isNumber(rest[i+2:]) {
		return JobName{}, false
	}
	n.Attempt, _ = strconv.Atoi(rest[i+2:])
	rest = rest[:i]
	if i = strings.LastIndexByte(rest, '-'); i < 0 || !ops[rest[i+1:]] {
		return JobName{}, false
	}
	n.Op, rest = rest[i+1:], rest[:i]
	if i = strings.IndexByte(rest, '-'); i < 0 {
		return JobName{}, false
	}
	n.KindShort, n.Name = rest[:i], rest[i+1:]
	if !isShort(n.KindShort) || n.Name == "" {
		return JobName{}, false
	}
	return n, true
}

// ParseHolder reads the Who field of an OpenTofu/Terraform state lock ("<user>@<hostname>")
// and returns the Job whose runner Pod holds it; ok is false when the holder is not one of our
// runner Pods (a person, CI, another tool), whose lock must never be broken automatically.
func ParseHolder(who string) (n JobName, ok bool) {
	i := strings.LastIndexByte(who, '@')
	if i < 0 {
		return JobName{}, false
	}
	host := who[i+1:]
	cut := len(host) - podSuffixLen - 1
	if cut <= 0 || host[cut] != '-' || !isPodSuffix(host[cut+1:]) {
		return JobName{}, false
	}
	return ParseName(host[:cut])
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isNumber accepts what strconv.Itoa writes for attempt numbers: no sign, no leading zero.
func isNumber(s string) bool {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isPodSuffix accepts the random suffix the API server appends to generated names
// (k8s.io/apimachinery/pkg/util/rand's alphabet: consonants and digits without vowels).
func isPodSuffix(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("bcdfghjklmnpqrstvwxz2456789", c) {
			return false
		}
	}
	return len(s) == podSuffixLen
}

// isShort reports whether s abbreviates a CAPTF kind.
func isShort(s string) bool {
	_, ok := captfv1.LookupShort(s)
	return ok
}
