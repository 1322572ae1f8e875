package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Handler serves the proxy's control API:
//
//	GET  /routes          every route's faults and counters (JSON)
//	PUT  /routes/{name}   set a route's faults (a Faults JSON body)
//	POST /heal            clear every route's faults
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /routes", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p.Stats())
	})
	mux.HandleFunc("PUT /routes/{name}", func(w http.ResponseWriter, r *http.Request) {
		var f Faults
		dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			http.Error(w, "faults: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := p.Set(r.PathValue("name"), f); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /heal", func(w http.ResponseWriter, _ *http.Request) {
		p.Heal()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// Control drives a proxy's control API at an address (host:port).
type Control struct {
	Addr string
}

var httpc = &http.Client{Timeout: 10 * time.Second}

func (c Control) do(method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+c.Addr+path, rd)
	if err != nil {
		return nil, err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("faultproxy %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// Set sets route's faults.
func (c Control) Set(route string, f Faults) error {
	_, err := c.do(http.MethodPut, "/routes/"+route, f)
	return err
}

// SetAll sets the same faults on every route.
func (c Control) SetAll(f Faults) error {
	st, err := c.Stats()
	if err != nil {
		return err
	}
	for name := range st {
		if err := c.Set(name, f); err != nil {
			return err
		}
	}
	return nil
}

// Heal clears every route's faults.
func (c Control) Heal() error {
	_, err := c.do(http.MethodPost, "/heal", nil)
	return err
}

// Stats returns every route's faults and counters.
func (c Control) Stats() (map[string]RouteStats, error) {
	b, err := c.do(http.MethodGet, "/routes", nil)
	if err != nil {
		return nil, err
	}
	var st map[string]RouteStats
	return st, json.Unmarshal(b, &st)
}
