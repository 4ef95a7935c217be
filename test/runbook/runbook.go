// Package runbook reads the runbooks of docs/runbooks as the commands an operator runs, so that
// tests run them verbatim: every ```sh block, in order, section by section, in one shell.
//
// What a runbook promises is in its text, and this package reads only that:
//
//   - Every ```sh block is run; ```text, ```yaml and other blocks are shown, never run.
//   - A command is one line of a block (a trailing backslash continues it on the next);
//     comment lines and blank lines are not commands.
//   - A command exits 0 unless its line says otherwise with a trailing comment "# exit N"
//     (the code on the situation its section starts from, as the text explains).
//   - The sentence starting "On the quickstart" names the runbook's placeholders and what they
//     are on the quickstart: "`my-cluster` is `demo`". Those words, and only those, are replaced
//     when the runbook is run there.
package runbook

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Runbook is one runbook's commands.
type Runbook struct {
	// Path is the file it was read from.
	Path string
	// Title is the first heading.
	Title string
	// Sections are the parts under each "## " heading (the first one, before any, is "").
	Sections []Section
	// Quickstart maps each placeholder to its value on the quickstart.
	Quickstart map[string]string
}

// Section is the commands under one heading.
type Section struct {
	Heading  string
	Commands []Command
}

// Command is one command of a ```sh block.
type Command struct {
	// Line is its first line in the file.
	Line int
	// Text is the command as the shell runs it (continuations joined).
	Text string
	// Exit is the exit code the runbook says it ends with.
	Exit int
}

var (
	exitRE       = regexp.MustCompile(`\s#\s*exit (\d+)\b`)
	placeholerRE = regexp.MustCompile("`([^`]+)` is `([^`]+)`")
)

// Read reads a runbook file.
func Read(path string) (*Runbook, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.Path = path
	return r, nil
}

// ReadAll reads every runbook of dir (index.md is the list of them, not one).
func ReadAll(dir string) ([]*Runbook, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []*Runbook
	for _, p := range paths {
		if filepath.Base(p) == "index.md" {
			continue
		}
		r, err := Read(p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Parse reads a runbook's Markdown.
func Parse(md []byte) (*Runbook, error) {
	r := &Runbook{Sections: []Section{{}}, Quickstart: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	var (
		n         int
		fence     string // the open fence's info string ("" outside a block)
		inBlock   bool
		pending   *Command
		paragraph []string
	)
	flushParagraph := func() {
		text := strings.Join(paragraph, " ")
		paragraph = nil
		if !strings.HasPrefix(text, "On the quickstart") && !strings.HasPrefix(text, "On the [quickstart]") {
			return
		}
		for _, m := range placeholerRE.FindAllStringSubmatch(text, -1) {
			r.Quickstart[m[1]] = m[2]
		}
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if !inBlock {
				flushParagraph()
				inBlock, fence = true, strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
				continue
			}
			if pending != nil {
				return nil, fmt.Errorf("line %d: the block ends inside a continued command", n)
			}
			inBlock = false
			continue
		}
		if inBlock {
			if fence != "sh" {
				continue
			}
			if pending == nil {
				if trimmed == "" || strings.HasPrefix(trimmed, "#") {
					continue
				}
				pending = &Command{Line: n}
			} else {
				pending.Text += "\n"
			}
			pending.Text += line
			if strings.HasSuffix(line, "\\") {
				continue
			}
			c := *pending
			pending = nil
			if m := exitRE.FindStringSubmatch(c.Text); m != nil {
				c.Exit, _ = strconv.Atoi(m[1])
			}
			last := &r.Sections[len(r.Sections)-1]
			last.Commands = append(last.Commands, c)
			continue
		}
		switch {
		case strings.HasPrefix(line, "# ") && r.Title == "":
			flushParagraph()
			r.Title = strings.TrimPrefix(line, "# ")
		case strings.HasPrefix(line, "## "):
			flushParagraph()
			r.Sections = append(r.Sections, Section{Heading: strings.TrimPrefix(line, "## ")})
		case trimmed == "":
			flushParagraph()
		default:
			paragraph = append(paragraph, trimmed)
		}
	}
	flushParagraph()
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inBlock {
		return nil, fmt.Errorf("a code block is not closed")
	}
	return r, nil
}

// Commands are every command of the runbook, in order.
func (r *Runbook) Commands() []Command {
	var out []Command
	for _, s := range r.Sections {
		out = append(out, s.Commands...)
	}
	return out
}

// Substitute returns text with every placeholder of mapping replaced by its value, where it
// stands as a word of its own (not inside another name: "my-cluster" in "my-cluster-md-0" is
// left alone). Longer placeholders are replaced first, so one containing another is replaced
// whole; a value is never searched again.
func Substitute(text string, mapping map[string]string) string {
	keys := make([]string, 0, len(mapping))
	for k := range mapping {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return len(keys[i]) > len(keys[j]) || len(keys[i]) == len(keys[j]) && keys[i] < keys[j]
	})
	type span struct{ start, end int }
	var taken []span
	free := func(a, b int) bool {
		for _, t := range taken {
			if a < t.end && t.start < b {
				return false
			}
		}
		return true
	}
	var repl []struct {
		span
		value string
	}
	for _, k := range keys {
		for from := 0; ; {
			i := strings.Index(text[from:], k)
			if i < 0 {
				break
			}
			a, b := from+i, from+i+len(k)
			from = a + 1
			if (a > 0 && wordByte(text[a-1])) || (b < len(text) && wordByte(text[b])) || !free(a, b) {
				continue
			}
			taken = append(taken, span{a, b})
			repl = append(repl, struct {
				span
				value string
			}{span{a, b}, mapping[k]})
		}
	}
	sort.Slice(repl, func(i, j int) bool { return repl[i].start < repl[j].start })
	var out strings.Builder
	last := 0
	for _, r := range repl {
		out.WriteString(text[last:r.start])
		out.WriteString(r.value)
		last = r.end
	}
	out.WriteString(text[last:])
	return out.String()
}

// wordByte reports whether b continues a name: a placeholder next to one is part of another.
func wordByte(b byte) bool {
	return b == '-' || b == '_' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}
