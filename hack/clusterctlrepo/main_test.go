package main

import "testing"

func TestLoneVariablesAreQuoted(t *testing.T) {
	in := `        - name: A
          value: ${CAPX_STATE_BACKUPS:=5}
        - name: B
          value: ${CAPX_WATCH_FILTER:=""}
          value: prefix-${X}
`
	want := `        - name: A
          value: '${CAPX_STATE_BACKUPS:=5}'
        - name: B
          value: ${CAPX_WATCH_FILTER:=""}
          value: prefix-${X}
`
	if got := string(loneVariable.ReplaceAll([]byte(in), []byte("${1}'${2}'"))); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestCheckSeries(t *testing.T) {
	md := []byte("releaseSeries:\n- major: 0\n  minor: 1\n  contract: v1beta2\n")
	if err := checkSeries(md, "v0.1.0-snapshot.gabc"); err != nil {
		t.Error(err)
	}
	if err := checkSeries(md, "v0.2.0"); err == nil {
		t.Error("v0.2.0 is not in the metadata: no error")
	}
}
