package cmdutil

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// ExitCode is a process exit code. Every capx tool uses the same codes, so runbooks can rely
// on them:
//
//	0 ExitOK         success; for checks and diffs: nothing found
//	1 ExitFound      the command worked and found something: a plan has changes (like
//	                 kubectl diff), a preflight check failed, broken owner references, orphans
//	2 ExitFailure    the command failed (API errors, timeouts, refused operations)
//	3 ExitUsage      bad flags or arguments, or a confirmation needed --yes without a terminal
//	4 ExitCancelled  the user answered no to a confirmation
type ExitCode int

// The exit codes.
const (
	ExitOK        ExitCode = 0
	ExitFound     ExitCode = 1
	ExitFailure   ExitCode = 2
	ExitUsage     ExitCode = 3
	ExitCancelled ExitCode = 4
)

// ExitError carries an exit code with an error. A nil Err prints nothing: the command already
// said what it found.
type ExitError struct {
	Code ExitCode
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// WithCode gives err an exit code; a nil err with a code is a silent exit with that code.
func WithCode(code ExitCode, err error) error { return &ExitError{Code: code, Err: err} }

// Usagef is a usage error (exit code 3).
func Usagef(format string, a ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

// ErrFound exits with ExitFound and prints nothing more.
var ErrFound error = &ExitError{Code: ExitFound}

// CodeOf returns the exit code for err: ExitOK for nil, the code of an ExitError, and
// ExitError for any other error.
func CodeOf(err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitFailure
}

// Args wraps a cobra argument validator so that its errors exit with ExitUsage.
func Args(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w\nSee '%s --help'", err, cmd.CommandPath())}
		}
		return nil
	}
}

// NoArgs, ExactArgs and MaximumNArgs are cobra's validators with ExitUsage.
var NoArgs = Args(cobra.NoArgs)

// ExactArgs accepts exactly n arguments.
func ExactArgs(n int) cobra.PositionalArgs { return Args(cobra.ExactArgs(n)) }

// MaximumNArgs accepts at most n arguments.
func MaximumNArgs(n int) cobra.PositionalArgs { return Args(cobra.MaximumNArgs(n)) }

// Execute runs root with args (os.Args[1:] when nil), prints any error on streams.ErrOut as
// "Error: ..." and returns the exit code. Flag errors exit with ExitUsage.
func Execute(root *cobra.Command, streams *IOStreams, args []string) ExitCode {
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w\nSee '%s --help'", err, cmd.CommandPath())}
	})
	if args != nil {
		root.SetArgs(args)
	}
	_, err := root.ExecuteC()
	code := CodeOf(err)
	var e *ExitError
	if err != nil && (!errors.As(err, &e) || e.Err != nil) {
		fmt.Fprintln(streams.ErrOut, "Error:", err)
	}
	// cobra reports unknown commands and missing subcommands as plain errors.
	if code == ExitFailure && err != nil && isCobraUsage(err) {
		code = ExitUsage
	}
	return code
}

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "accepts ", "requires at least"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
