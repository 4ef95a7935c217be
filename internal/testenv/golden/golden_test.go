package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records what Assert reports instead of failing.
type recorder struct {
	testing.TB
	name          string
	fatal, errors []string
	logs          []string
}

func (r *recorder) Helper()        {}
func (r *recorder) Name() string   { return r.name }
func (r *recorder) Fatal(a ...any) { r.fatal = append(r.fatal, fmt.Sprint(a...)) }
func (r *recorder) Fatalf(format string, a ...any) {
	r.fatal = append(r.fatal, fmt.Sprintf(format, a...))
}
func (r *recorder) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}
func (r *recorder) Logf(format string, a ...any) { r.logs = append(r.logs, fmt.Sprintf(format, a...)) }
func (r *recorder) failures() string             { return strings.Join(append(r.fatal, r.errors...), "\n") }
func newRecorder(name string) *recorder          { return &recorder{name: name} }
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	must(t, os.WriteFile(path, []byte(content), 0o644))
}
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestAssert(t *testing.T) {
	const command = "UPDATE_GOLDEN=1 go test ./internal/testenv/golden -run '^TestTree$/^tree\\.golden$' -count=1"
	for _, tc := range []struct {
		name     string
		env      string
		file     *string // nil: no file
		got      string
		fatal    []string // substrings of the one Fatal, if any
		errors   []string // substrings of the one Errorf, if any
		after    *string  // the file afterwards (nil: not there)
		rewrites bool
	}{
		{name: "equal", file: ptr("a\nb\n"), got: "a\nb\n", after: ptr("a\nb\n")},
		{name: "a line differs", file: ptr("a\nb\n"), got: "a\nc\n", after: ptr("a\nb\n"),
			errors: []string{`differs from the output (first difference at line 2: got "c", want "b")`, "rewrite it with: " + command, "--- got\na\nc\n"}},
		{name: "no file", got: "a\n", fatal: []string{"no such file", "create it with: " + command}},
		{name: "rewrite", env: "1", file: ptr("old\n"), got: "new\n", after: ptr("new\n"), rewrites: true},
		{name: "create", env: "1", got: "new\n", after: ptr("new\n"), rewrites: true},
		{name: "a value other than 1", env: "true", file: ptr("old\n"), got: "new\n", after: ptr("old\n"),
			fatal: []string{`UPDATE_GOLDEN="true": set it to 1 to rewrite the golden files, or unset it to compare`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(Env, tc.env)
			path := filepath.Join(t.TempDir(), "testdata", "tree.golden")
			if tc.file != nil {
				must(t, os.MkdirAll(filepath.Dir(path), 0o755))
				writeFile(t, path, *tc.file)
			}
			r := newRecorder("TestTree/tree.golden")
			Assert(r, path, []byte(tc.got))
			check := func(what string, got []string, want []string) {
				t.Helper()
				if len(want) == 0 {
					if len(got) != 0 {
						t.Errorf("unexpected %s: %q", what, got)
					}
					return
				}
				if len(got) != 1 {
					t.Fatalf("%s: %q, want one", what, got)
				}
				for _, w := range want {
					if !strings.Contains(got[0], w) {
						t.Errorf("%s lacks %q:\n%s", what, w, got[0])
					}
				}
			}
			check("Fatal", r.fatal, tc.fatal)
			check("Errorf", r.errors, tc.errors)
			b, err := os.ReadFile(path)
			switch {
			case tc.after == nil && err == nil:
				t.Errorf("a file was written: %q", b)
			case tc.after != nil && string(b) != *tc.after:
				t.Errorf("the file holds %q (%v), want %q", b, err, *tc.after)
			}
			if logged := len(r.logs) == 1 && strings.Contains(r.logs[0], "rewrote "+path); logged != tc.rewrites {
				t.Errorf("logs %q", r.logs)
			}
		})
	}
}

// A rewrite that changes nothing leaves the file alone: its modification time stays.
func TestRewriteOfTheSameContentWritesNothing(t *testing.T) {
	t.Setenv(Env, "1")
	path := filepath.Join(t.TempDir(), "same.golden")
	writeFile(t, path, "same\n")
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, os.Chtimes(path, old, old))
	r := newRecorder("TestSame")
	Assert(r, path, []byte("same\n"))
	st, err := os.Stat(path)
	must(t, err)
	if f := r.failures(); f != "" || !st.ModTime().Equal(old) {
		t.Fatalf("the file was written again (modified %s): %s", st.ModTime(), f)
	}
}

func TestFirstDifference(t *testing.T) {
	for _, tc := range []struct{ got, want, diff string }{
		{"a\nb", "a\nc", `first difference at line 2: got "b", want "c"`},
		{"a\nb \n", "a\nb\n", `first difference at line 2: got "b ", want "b"`},
		{"a\nb\nc", "a\nb", `got 1 more line(s) from line 3: "c"`},
		{"a", "a\nb\nc", `got 2 line(s) fewer, missing from line 2: "b"`},
		{"\x1b[1mA\x1b[0m", "A", `first difference at line 1: got "\x1b[1mA\x1b[0m", want "A"`},
	} {
		if d := firstDifference([]byte(tc.got), []byte(tc.want)); d != tc.diff {
			t.Errorf("%q vs %q: %s, want %s", tc.got, tc.want, d, tc.diff)
		}
	}
}

func TestRunPatternSelectsOnlyThatTest(t *testing.T) {
	for name, want := range map[string]string{
		"TestTree":                    "^TestTree$",
		"TestTree/tree-colour.golden": `^TestTree$/^tree-colour\.golden$`,
		"TestSeed/names_only":         "^TestSeed$/^names_only$",
	} {
		if got := runPattern(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}

func ptr(s string) *string { return &s }
