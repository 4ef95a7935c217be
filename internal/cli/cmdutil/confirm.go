package cmdutil

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
)

// Confirm asks question on a terminal and returns nil only for "y" or "yes". yes (the
// command's --yes) skips the question. Without a terminal it refuses with ExitUsage, so a
// script never hangs on a prompt and never acts without saying --yes; an answer other than yes
// returns an ExitCancelled error.
func Confirm(streams *IOStreams, yes bool, question string) error {
	if yes {
		return nil
	}
	if !streams.CanPrompt() {
		return WithCode(ExitUsage, errors.New("no terminal to confirm on: re-run with --yes to go ahead without a question"))
	}
	fmt.Fprintf(streams.ErrOut, "%s [y/N]: ", question)
	line, err := bufio.NewReader(streams.In).ReadString('\n')
	if err != nil && line == "" {
		return WithCode(ExitCancelled, errors.New("cancelled: no answer"))
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return WithCode(ExitCancelled, errors.New("cancelled: nothing was changed"))
}
