package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// WriteLog copies a daemon's log to w: the last lines lines (all when lines <= 0), then, with
// follow, whatever is appended until ctx ends (Ctrl-C for `hack/cluster logs -f`).
func (c *Cluster) WriteLog(ctx context.Context, w io.Writer, daemon string, lines int, follow bool) error {
	if _, ok := daemonByName(daemon); !ok {
		return fmt.Errorf("no daemon %q; one of %v", daemon, DaemonNames())
	}
	path := c.l.logFile(daemon)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if lines > 0 {
		if _, err := io.WriteString(w, tail(path, lines)+"\n"); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			return err
		}
	} else if _, err := io.Copy(w, f); err != nil {
		return err
	}
	for follow {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil
}
