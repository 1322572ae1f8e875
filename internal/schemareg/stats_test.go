package schemareg

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStatsOneRequestPerID: lookups of a new id that arrive while its
// fetch is in flight wait for it and count as hits; the misses are the
// fetches, and equal the requests the registry gets (one per new id).
func TestStatsOneRequestPerID(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path != "/schemas/ids/7" {
			http.NotFound(w, r)
			return
		}
		<-release // held until every lookup waits on this fetch
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		w.Write([]byte(`{"schemaType":"AVRO","schema":"{\"type\":\"string\"}"}`))
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const lookups = 20
	var wg sync.WaitGroup
	for range lookups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.SchemaByID(context.Background(), 7); err != nil {
				t.Errorf("schema id 7: %v", err)
			}
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); c.cache.waiting(7) < lookups-1; {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("%d lookups wait on the fetch of id 7, want %d", c.cache.waiting(7), lookups-1)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	// And once more, from the cache.
	if _, err := c.SchemaByID(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d registry requests for id 7, want 1", n)
	}
	if h, m, r := c.Stats.CacheHits.Load(), c.Stats.CacheMisses.Load(), c.Stats.Requests.Load(); h != lookups || m != 1 || r != 1 {
		t.Errorf("hits %d, misses %d, requests %d: want %d, 1 and 1", h, m, r, lookups)
	}
}
