package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			http.Error(w, `{"message":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"result":[]}`))
	}))
	defer srv.Close()
	cases := map[string]struct {
		bearer string
		args   []string
		want   int
	}{
		"ok":            {"good", []string{srv.URL}, 0},
		"refused":       {"bad", []string{srv.URL}, 1},
		"no token":      {"", []string{srv.URL}, 1},
		"no answer":     {"good", []string{"http://127.0.0.1:1/"}, 2},
		"no url":        {"", nil, 2},
		"two urls":      {"", []string{srv.URL, srv.URL}, 2},
		"malformed url": {"", []string{"http://[::1"}, 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("HTTPGET_BEARER", tc.bearer)
			if got := run(tc.args); got != tc.want {
				t.Errorf("run(%q) = %d, want %d", tc.args, got, tc.want)
			}
		})
	}
}
