package state

import (
	"errors"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// Error is why a state cannot be read. Its Reason is one of the StateReadable condition
// reasons (captfv1.StateNotFoundReason, StateEncryptedReason, StateCorruptReason,
// StateInconsistentReason), so a controller maps it to the condition without a switch; Message
// says what is wrong and what to do, and names Secrets, never state contents.
type Error struct {
	// Reason is the StateReadable condition reason.
	Reason string
	// Secret is the base state Secret's name.
	Secret string
	// Message is actionable and free of state contents; it suits a condition message.
	Message string
}

func (e *Error) Error() string { return "state: read " + e.Secret + ": " + e.Message }

// Is lets errors.Is(err, ErrCorrupt) and friends match any Error with the same Reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Secret == "" && t.Message == "" && t.Reason == e.Reason
}

// Sentinels for errors.Is; the Error returned carries the Secret and the message.
var (
	// ErrNotFound: there is no state Secret yet (nothing was ever applied, or it was deleted).
	ErrNotFound = &Error{Reason: captfv1.StateNotFoundReason}
	// ErrEncrypted: the state uses OpenTofu state encryption, which CAPTF cannot read.
	ErrEncrypted = &Error{Reason: captfv1.StateEncryptedReason}
	// ErrCorrupt: the state does not decompress or decode, is not version 4, or is too large.
	ErrCorrupt = &Error{Reason: captfv1.StateCorruptReason}
	// ErrInconsistent: the state's chunks are missing, duplicated or carry foreign names.
	ErrInconsistent = &Error{Reason: captfv1.StateInconsistentReason}
)

// Reason returns the StateReadable condition reason of an error from Read or Decode, or "" if
// err is not a state error (an API error, for example).
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func newError(reason, secret, message string) *Error {
	return &Error{Reason: reason, Secret: secret, Message: message}
}
