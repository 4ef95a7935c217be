package gpucheck

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/gpucheck"
)

// table prints rows in aligned columns; style colours a cell after it is padded, so escape
// codes never upset the alignment.
type table struct {
	header []string
	rows   [][]string
	style  func(col int, cell string) string
}

func (t *table) write(w io.Writer) {
	widths := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	line := func(r []string, style func(int, string) string) {
		var b strings.Builder
		for i, c := range r {
			cell := c
			if i < len(r)-1 {
				cell += strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2)
			}
			if style != nil {
				cell = style(i, cell)
			}
			b.WriteString(cell)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(t.header, nil)
	for _, r := range t.rows {
		line(r, t.style)
	}
}

func classStyle(st *cmdutil.Styles, c gpucheck.Class, s string) string {
	switch c {
	case gpucheck.Orphaned, gpucheck.Renamed, gpucheck.RecycleBin, gpucheck.AttachedForeign:
		return st.Bad(s)
	case gpucheck.Unverified:
		return st.Warn(s)
	case gpucheck.Owned:
		return st.OK(s)
	}
	return st.Faint(s)
}

func attachedTo(f gpucheck.Finding) string {
	switch {
	case f.VM != nil:
		return fmt.Sprintf("%s (%d)", f.VM.Name, f.VM.ID)
	case f.DeletedAt != nil:
		return "recycle bin"
	}
	return "-"
}

// quote shows names with spaces or odd characters unambiguously.
func quote(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r > '~' }) {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// writeFindings prints the findings table.
func writeFindings(w io.Writer, st *cmdutil.Styles, fs []gpucheck.Finding, accounts bool) {
	t := &table{header: []string{"LOCATION", "ID", "NAME", "CLASS", "ATTACHED TO", "REASON"}}
	if accounts {
		t.header = append([]string{"ACCOUNT"}, t.header...)
	}
	classCol := len(t.header) - 3
	for _, f := range fs {
		reason := f.Reason
		if d := f.BilledInRecycleBin; d != nil {
			if time.Duration(*d) < time.Minute {
				reason += " (deleted under a minute ago)"
			} else {
				reason += fmt.Sprintf(" (deleted %s ago)", d)
			}
		}
		row := []string{f.Location, f.ID, quote(f.Name), string(f.Class), attachedTo(f), reason}
		if accounts {
			row = append([]string{f.Account}, row...)
		}
		t.rows = append(t.rows, row)
	}
	t.style = func(col int, cell string) string {
		if col != classCol {
			return cell
		}
		return classStyle(st, gpucheck.Class(strings.TrimSpace(cell)), cell)
	}
	t.write(w)
}

// writeCheck prints a check: the table, then one summary line that never says "none" for an
// incomplete listing.
func (o *Options) writeCheck(rep *gpucheck.Report) error {
	w := o.IO.Out
	shown := o.shown(rep)
	accounts := false
	for _, l := range rep.Locations {
		accounts = accounts || l.Account != ""
	}
	if len(shown) > 0 {
		writeFindings(w, o.Styles, shown, accounts)
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, o.summaryLine(rep))
	if !rep.OwnershipChecked && rep.OwnershipNote != "" {
		fmt.Fprintln(o.IO.ErrOut, "Warning: ownership "+rep.OwnershipNote+".")
	}
	return nil
}

func (o *Options) summaryLine(rep *gpucheck.Report) string {
	st := o.Styles
	scope := fmt.Sprintf("%d reservations in %s", rep.Summary.Reservations, plural(len(rep.Locations), "location"))
	if !rep.Complete {
		return st.Bad("INCOMPLETE:") + " " + scope + " read before the listing failed; no conclusion is drawn (see the error below)."
	}
	if rep.Summary.Orphans == 0 {
		return st.OK("No orphaned vGPU reservations") + " among " + scope + "."
	}
	sum := rep.Summary
	releasable := fmt.Sprintf("%d releasable", sum.Releasable)
	for _, flag := range []string{gpucheck.OptInRenamed, gpucheck.OptInUnverified} {
		if n := sum.ReleasableWith[flag]; n > 0 {
			releasable += fmt.Sprintf(", %d more with %s", n, flag)
		}
	}
	s := st.Bad(plural(sum.Orphans, "orphaned reservation")) + fmt.Sprintf(" (%s) among %s.", releasable, scope)
	switch {
	case sum.Releasable > 0:
		s += " Release them with: " + o.releaseHint()
	case sum.ReleasableWith[gpucheck.OptInUnverified] > 0:
		s += " Once you are sure no management cluster owns them, release them with: " + o.releaseHint(gpucheck.OptInUnverified)
	case sum.ReleasableWith[gpucheck.OptInRenamed] > 0:
		s += " Once you know nobody keeps them, release them with: " + o.releaseHint(gpucheck.OptInRenamed)
	}
	return s
}

// releaseHint is the release command for what was just checked: the same locations, the same
// credential source and ownership mode (file paths only; never a secret), and the opt-ins.
func (o *Options) releaseHint(optIns ...string) string {
	cmd := o.ReleaseCommand
	add := func(flag, v string) {
		if v != "" {
			cmd += " --" + flag + " " + v
		}
	}
	for _, l := range o.Locations {
		add("location", l)
	}
	add("url", o.Creds.URL)
	add("customer", o.Creds.Customer)
	add("jwt-file", o.Creds.JWTFile)
	add("client-id", o.Creds.ClientID)
	add("client-secret-file", o.Creds.ClientSecretFile)
	add("iam-url", o.Creds.IAMURL)
	add("credentials-secret", o.CredentialSecret)
	if o.AllowHTTP {
		cmd += " --allow-http"
	}
	if o.Ownership != OwnershipAuto {
		add("ownership", string(o.Ownership))
	}
	for _, flag := range optIns {
		cmd += " " + flag
	}
	return cmd
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
