package externaldns

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// maxBody bounds a request body: a change set of thousands of endpoints is well below it.
const maxBody = 16 << 20

// Handler serves the webhook protocol: GET / (negotiation: the domain filter), GET /records,
// POST /records (a change set, answered 204 once it is all done), POST /adjustendpoints, and
// GET /healthz.
func Handler(p *Provider) http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { reply(w, p.Filter) })
	m.HandleFunc("GET /records", func(w http.ResponseWriter, r *http.Request) {
		eps, err := p.Records(r.Context())
		if err != nil {
			p.Log.Error(err, "records")
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		reply(w, nonNil(eps))
	})
	m.HandleFunc("POST /records", func(w http.ResponseWriter, r *http.Request) {
		var ch Changes
		if err := decode(r, &ch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := p.ApplyChanges(r.Context(), ch); err != nil {
			p.Log.Error(err, "apply changes")
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("POST /adjustendpoints", func(w http.ResponseWriter, r *http.Request) {
		var eps []*Endpoint
		if err := decode(r, &eps); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reply(w, nonNil(p.AdjustEndpoints(eps)))
	})
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return m
}

// decode reads a JSON body, refusing one that is too large, malformed or followed by more.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		return errors.New("the body is not the webhook protocol's JSON: " + err.Error())
	}
	if dec.More() {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", MediaType)
	_ = json.NewEncoder(w).Encode(v)
}

// nonNil answers [] rather than null for no endpoints.
func nonNil(eps []*Endpoint) []*Endpoint {
	if eps == nil {
		return []*Endpoint{}
	}
	return eps
}
