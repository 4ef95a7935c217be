package cmdutil

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// ColorMode is --color: auto (colour when stdout is a terminal and NO_COLOR is unset), always
// or never.
type ColorMode string

// The colour modes.
const (
	ColorAuto   ColorMode = "auto"
	ColorAlways ColorMode = "always"
	ColorNever  ColorMode = "never"
)

func (m *ColorMode) String() string { return string(*m) }
func (m *ColorMode) Type() string   { return "when" }
func (m *ColorMode) Set(s string) error {
	switch ColorMode(strings.ToLower(s)) {
	case ColorAuto, ColorAlways, ColorNever:
		*m = ColorMode(strings.ToLower(s))
		return nil
	}
	return fmt.Errorf("unknown colour mode %q: use auto, always or never", s)
}

// Enabled decides whether to colour output written to a stream; isTTY says whether it is a
// terminal. NO_COLOR (any value) turns auto off; CLICOLOR_FORCE (not "0") turns it on.
func (m ColorMode) Enabled(isTTY bool) bool {
	switch m {
	case ColorAlways:
		return true
	case ColorNever:
		return false
	}
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
		return false
	}
	if v, ok := os.LookupEnv("CLICOLOR_FORCE"); ok && v != "0" {
		return true
	}
	return isTTY
}

// Styles colour text for one stream. When colour is off every method returns its input
// unchanged, so output piped to a file or a script never carries escape codes.
type Styles struct {
	on                                    bool
	ok, bad, warn, info, faint, bold, hdr lipgloss.Style
}

// NewStyles returns styles for w; on turns colour on.
func NewStyles(w io.Writer, on bool) *Styles {
	r := lipgloss.NewRenderer(w)
	if on {
		r.SetColorProfile(termenv.ANSI256)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	return &Styles{
		on:    on,
		ok:    r.NewStyle().Foreground(lipgloss.Color("2")),
		bad:   r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		warn:  r.NewStyle().Foreground(lipgloss.Color("3")),
		info:  r.NewStyle().Foreground(lipgloss.Color("6")),
		faint: r.NewStyle().Faint(true),
		bold:  r.NewStyle().Bold(true),
		hdr:   r.NewStyle().Bold(true).Foreground(lipgloss.Color("4")),
	}
}

// Enabled reports whether the styles colour.
func (s *Styles) Enabled() bool { return s.on }

func (s *Styles) render(st lipgloss.Style, str string) string {
	if !s.on || str == "" {
		return str
	}
	return st.Render(str)
}

// OK is green: healthy, created, passed.
func (s *Styles) OK(str string) string { return s.render(s.ok, str) }

// Bad is bold red: failed, deleted, replaced.
func (s *Styles) Bad(str string) string { return s.render(s.bad, str) }

// Warn is yellow: unknown, waiting, updated in place.
func (s *Styles) Warn(str string) string { return s.render(s.warn, str) }

// Info is cyan: neutral facts worth noticing (moved, imported).
func (s *Styles) Info(str string) string { return s.render(s.info, str) }

// Faint is dim: secondary detail.
func (s *Styles) Faint(str string) string { return s.render(s.faint, str) }

// Bold is bold.
func (s *Styles) Bold(str string) string { return s.render(s.bold, str) }

// Header is a bold blue section title.
func (s *Styles) Header(str string) string { return s.render(s.hdr, str) }
