package runbook

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Shell is one bash that runs a runbook's commands one after the other, as an operator's
// terminal does: what one command sets (hash=$(...)) the next reads. No command reads the
// shell's input (each gets /dev/null), so none can swallow the commands after it.
type Shell struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	marker string
}

// StartShell starts bash in dir with exactly env (no profile, no rc files).
func StartShell(dir string, env []string) (*Shell, error) {
	nonce := make([]byte, 8)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = pw, pw
	// Its own process group, so that a timeout ends what the command started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pw.Close()
	s := &Shell{cmd: cmd, in: in, lines: make(chan string, 1024), marker: ":::runbook-" + hex.EncodeToString(nonce) + " "}
	go func() {
		defer close(s.lines)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	return s, nil
}

// Run runs one command and returns what it printed (stdout and stderr, interleaved) and its
// exit code. A command still running after timeout kills the shell: the error says so.
func (s *Shell) Run(text string, timeout time.Duration) (string, int, error) {
	script := fmt.Sprintf("{\n%s\n} </dev/null 2>&1\nprintf '\\n%s%%d\\n' \"$?\"\n", text, s.marker)
	if _, err := io.WriteString(s.in, script); err != nil {
		return "", 0, fmt.Errorf("the shell is gone: %w", err)
	}
	var out []string
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				return strings.Join(out, "\n"), 0, fmt.Errorf("the shell exited before the command ended")
			}
			if rest, found := strings.CutPrefix(line, s.marker); found {
				code, err := strconv.Atoi(rest)
				if len(out) > 0 && out[len(out)-1] == "" {
					out = out[:len(out)-1] // the newline printed before the marker
				}
				return strings.Join(out, "\n"), code, err
			}
			out = append(out, line)
		case <-deadline:
			s.kill()
			return strings.Join(out, "\n"), 0, fmt.Errorf("still running after %s: killed", timeout)
		}
	}
}

// Close ends the shell.
func (s *Shell) Close() error {
	_ = s.in.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		s.kill()
		return <-done
	}
}

func (s *Shell) kill() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) }

// Step is one command of a runbook as it ran.
type Step struct {
	Command
	// Ran is the command with the placeholders replaced.
	Ran    string
	Output string
	Code   int
	Err    error
}

// OK reports whether the command ended as the runbook says.
func (s Step) OK() bool { return s.Err == nil && s.Code == s.Exit }

func (s Step) String() string {
	status := fmt.Sprintf("exit %d", s.Code)
	if s.Err != nil {
		status = s.Err.Error()
	}
	return fmt.Sprintf("line %d: $ %s\n%s\n(%s; the runbook says exit %d)", s.Line, s.Ran, s.Output, status, s.Exit)
}

// RunSection runs a section's commands in sh, with mapping's placeholders replaced, each for
// at most timeout, until one does not end as the runbook says. It writes every step to log and
// returns the steps that ran; the last one failed when err is not nil.
func RunSection(sh *Shell, sec Section, mapping map[string]string, timeout time.Duration, log io.Writer) ([]Step, error) {
	var steps []Step
	for _, c := range sec.Commands {
		st := Step{Command: c, Ran: Substitute(c.Text, mapping)}
		st.Output, st.Code, st.Err = sh.Run(st.Ran, timeout)
		steps = append(steps, st)
		fmt.Fprintf(log, "%s\n", st)
		if !st.OK() {
			return steps, fmt.Errorf("%s: %q: %s", sec.Heading, c.Text, st)
		}
	}
	return steps, nil
}
