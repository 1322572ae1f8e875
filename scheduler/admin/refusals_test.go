package admin

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/tests/logbuf"
)

// 1,000 refused requests with long paths write a bounded log: a burst of
// lines, then one summary line with the count per interval.
func TestRefusedRequestsLogBounded(t *testing.T) {
	var logBuf logbuf.Buffer
	const interval = 2 * time.Second
	srv, _, _, api := newTestAPIWith(t, &logBuf, func(a *API) { a.refusals.interval = interval })
	path := "/v1/pipelines/" + strings.Repeat("a", 2048)
	start := time.Now()
	const n = 1000
	for i := range n {
		if code, _ := do(t, srv, "GET", path, "wrong", "", nil); code != 401 && code != 429 { // throttled past the first few
			t.Fatalf("request %d: %d", i, code)
		}
	}
	took := time.Since(start)
	// At most burst lines and one summary per interval the requests spanned.
	windows := int(took/interval) + 2
	maxBytes := windows * (refusalBurst + 1) * 400
	summaries := regexp.MustCompile(`not logged one by one\)" count=(\d+)`)
	deadline := time.Now().Add(took + 3*interval)
	for {
		log := logBuf.String()
		logged := strings.Count(log, `msg="admin: unauthorized request"`)
		for _, m := range summaries.FindAllStringSubmatch(log, -1) {
			c, _ := strconv.Atoi(m[1])
			logged += c
		}
		if len(log) > maxBytes {
			t.Fatalf("%d refused requests in %s wrote %d bytes of log, want at most %d:\n%.2000s", n, took, len(log), maxBytes, log)
		}
		if logged == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d refused requests accounted for in the log:\n%s", logged, n, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := api.refusals.total.Load(); got != n {
		t.Fatalf("refused counter %d, want %d", got, n)
	}
	t.Logf("%d refused requests in %s: %d bytes of log", n, took.Round(time.Millisecond), len(logBuf.String()))
}
