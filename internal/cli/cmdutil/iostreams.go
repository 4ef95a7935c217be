package cmdutil

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are a command's standard streams and whether each is a terminal. Commands write
// only to Out (results) and ErrOut (progress, warnings, errors), never to os.Stdout.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	InTTY, OutTTY, ErrTTY bool
}

// SystemIOStreams returns the process's streams with terminal detection.
func SystemIOStreams() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		InTTY:  isTerminal(os.Stdin),
		OutTTY: isTerminal(os.Stdout),
		ErrTTY: isTerminal(os.Stderr),
	}
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// CanPrompt reports whether a question can be asked and answered: stdin and stderr (where the
// question goes) are both terminals.
func (s *IOStreams) CanPrompt() bool { return s.InTTY && s.ErrTTY }

// TestIOStreams returns streams backed by buffers: in is read as stdin, out and errOut collect
// the output. tty makes all three claim to be terminals.
func TestIOStreams(tty bool) (s *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut, InTTY: tty, OutTTY: tty, ErrTTY: tty}, in, out, errOut
}
