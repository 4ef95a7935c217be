// Command clidocs writes the command reference of the project's binaries into
// docs/reference/commands/: one page per binary with the help of every command, found by walking
// the cobra tree through the built binary's own --help (so the page shows exactly what a user
// sees, whichever package defines the command), and lists them in mkdocs.yml's navigation. `make release-generate` runs it after `make build`;
// `make verify-release` fails when the pages are stale.
//
//	go run ./hack/clidocs [-bin bin] [-o docs/reference/commands] [-mkdocs mkdocs.yml] BINARY...
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Sections of cobra's help that are not lists of subcommands.
var notCommands = map[string]bool{
	"Usage:": true, "Aliases:": true, "Examples:": true, "Example:": true, "Flags:": true,
	"Global Flags:": true, "Additional help topics:": true,
}

// Cobra's generic commands are listed but not documented again under every binary.
var generic = map[string]bool{"help": true, "completion": true}

var entry = regexp.MustCompile(`^  ([a-z0-9][a-z0-9-]*)(\s{2,}.*)?$`)

type page struct {
	binary   string
	commands []command
}

type command struct {
	path []string // below the binary
	help string
}

func main() {
	binDir := flag.String("bin", "bin", "folder with the built binaries")
	outDir := flag.String("o", filepath.Join("docs", "reference", "commands"), "folder to write the pages to")
	mkdocs := flag.String("mkdocs", "mkdocs.yml", "site config whose navigation lists the pages (empty: leave it)")
	flag.Parse()
	var pages []page
	for _, name := range flag.Args() {
		if _, err := os.Stat(filepath.Join("cmd", name, "main.go")); err != nil {
			fmt.Fprintf(os.Stderr, "clidocs: cmd/%s does not exist yet; no page for %s\n", name, name)
			continue
		}
		p := page{binary: name}
		if err := walk(filepath.Join(*binDir, name), nil, &p); err != nil {
			fail(fmt.Errorf("%s: %w", name, err))
		}
		pages = append(pages, p)
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fail(err)
	}
	old, _ := filepath.Glob(filepath.Join(*outDir, "*.md"))
	keep := map[string]bool{filepath.Join(*outDir, "index.md"): true}
	for _, p := range pages {
		f := filepath.Join(*outDir, p.binary+".md")
		keep[f] = true
		if err := os.WriteFile(f, render(p), 0o644); err != nil {
			fail(err)
		}
	}
	for _, o := range old {
		if !keep[o] {
			_ = os.Remove(o)
		}
	}
	if err := os.WriteFile(filepath.Join(*outDir, "index.md"), index(pages), 0o644); err != nil {
		fail(err)
	}
	if *mkdocs != "" {
		if err := writeNav(*mkdocs, *outDir, pages); err != nil {
			fail(err)
		}
	}
}

// writeNav lists the pages in the site's navigation, between the "# BEGIN commands" and
// "# END commands" lines of mkdocs.yml, so a binary's page is in the menu as soon as it exists.
func writeNav(mkdocs, outDir string, pages []page) error {
	b, err := os.ReadFile(mkdocs)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case "# BEGIN commands":
			begin = i
		case "# END commands":
			end = i
		}
	}
	if begin < 0 || end < begin {
		return fmt.Errorf("%s: no \"# BEGIN commands\" ... \"# END commands\" lines to write the pages between", mkdocs)
	}
	indent := lines[begin][:len(lines[begin])-len(strings.TrimLeft(lines[begin], " "))]
	rel, err := filepath.Rel("docs", outDir)
	if err != nil {
		return err
	}
	nav := []string{indent + "- " + filepath.ToSlash(filepath.Join(rel, "index.md"))}
	sort.Slice(pages, func(i, j int) bool { return pages[i].binary < pages[j].binary })
	for _, p := range pages {
		nav = append(nav, fmt.Sprintf("%s- %s: %s", indent, display(p.binary), filepath.ToSlash(filepath.Join(rel, p.binary+".md"))))
	}
	out := append(append(append([]string{}, lines[:begin+1]...), nav...), lines[end:]...)
	return os.WriteFile(mkdocs, []byte(strings.Join(out, "\n")), 0o644)
}

// walk records the help of the command at path and of every subcommand below it.
func walk(bin string, path []string, p *page) error {
	help, err := helpOf(bin, path)
	if err != nil {
		return err
	}
	p.commands = append(p.commands, command{path: path, help: help})
	if len(path) > 0 && generic[path[len(path)-1]] {
		return nil
	}
	for _, sub := range subcommands(help) {
		if generic[sub] && len(path) > 0 {
			continue
		}
		if err := walk(bin, append(append([]string{}, path...), sub), p); err != nil {
			return err
		}
	}
	return nil
}

func helpOf(bin string, path []string) (string, error) {
	cmd := exec.Command(bin, append(append([]string{}, path...), "--help")...)
	// Help never contacts a cluster; no kubeconfig and no colour make that and the text certain.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+os.DevNull, "NO_COLOR=1", "HOME=$HOME")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := strings.TrimRight(out.String(), "\n ")
	// A flag-package program prints its usage and exits 0 or 2 for -help; output is what counts.
	if text == "" {
		return "", fmt.Errorf("%s --help printed nothing (%v)", strings.Join(path, " "), err)
	}
	return text, nil
}

// subcommands lists the names in the help's command sections (cobra's "Available Commands:",
// "Additional Commands:" and any command group titles).
func subcommands(help string) []string {
	var names []string
	in := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case line == "":
			in = false
		case !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":"):
			in = !notCommands[line]
		case in:
			if m := entry.FindStringSubmatch(line); m != nil {
				names = append(names, m[1])
			}
		}
	}
	return names
}

func display(binary string) string {
	if plugin, ok := strings.CutPrefix(binary, "kubectl-"); ok {
		return "kubectl " + plugin
	}
	return binary
}

func render(p page) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- Generated by hack/clidocs from the %s binary's help. DO NOT EDIT: run `make release-generate`. -->\n\n", p.binary)
	fmt.Fprintf(&b, "# %s\n\n", display(p.binary))
	if len(p.commands) > 1 {
		b.WriteString("Commands:\n\n")
		for _, c := range p.commands[1:] {
			full := display(p.binary) + " " + strings.Join(c.path, " ")
			fmt.Fprintf(&b, "%s- [`%s`](#%s)\n", strings.Repeat("    ", len(c.path)-1), full, anchor(full))
		}
		b.WriteString("\n")
	}
	for _, c := range p.commands {
		full := strings.TrimSpace(display(p.binary) + " " + strings.Join(c.path, " "))
		fmt.Fprintf(&b, "## %s\n\n```text\n%s\n```\n\n", full, c.help)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// anchor is the id MkDocs (Python-Markdown's toc) gives a heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func index(pages []page) []byte {
	sort.Slice(pages, func(i, j int) bool { return pages[i].binary < pages[j].binary })
	var b bytes.Buffer
	b.WriteString("<!-- Generated by hack/clidocs. DO NOT EDIT: run `make release-generate`. -->\n\n# Command reference\n\n")
	b.WriteString("Every command of every binary, with its help exactly as the binary prints it.\n\n")
	for _, p := range pages {
		noun := "commands"
		if len(p.commands) == 1 {
			noun = "command"
		}
		fmt.Fprintf(&b, "- [`%s`](%s.md): %d %s\n", display(p.binary), p.binary, len(p.commands), noun)
	}
	return b.Bytes()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "clidocs:", err)
	os.Exit(1)
}
