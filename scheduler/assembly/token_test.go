//go:build integration

package assembly

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestMissingAdminTokenBeforeAnyTopic: with the admin API on and no token
// (neither WASMSTREAM_ADMIN_TOKEN nor admin.token_file), a host on a real
// broker that may create its topics stops at once saying how to give one,
// and leaves nothing on the cluster: no registry, input, output,
// dead-letter or retry topic, no consumer group (before: the error came
// after 6 s, once the topics were created and the groups joined).
func TestMissingAdminTokenBeforeAnyTopic(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	t.Setenv(admin.TokenEnv, "")
	g := fmt.Sprintf("notoken-%d", time.Now().UnixNano())
	module, err := filepath.Abs("../../plugins/examples/uppercase/uppercase.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(module); err != nil {
		t.Fatalf("%v: build the examples first (make -s build plugins)", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	y := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  create_topics: true
pipelines:
  - name: p
    module: %s
    inputs: [%s-in]
    output: %s-out
    dead_letter_topic: %s-out.dlq
    retry: {max_attempts: 3, backoff: [1s]}
metrics:
  listen: ""
admin:
  listen: 127.0.0.1:0
  store_dir: %s
`, strings.Join(brokers, ","), g, module, g, g, g, filepath.Join(dir, "store"))
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	h, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	took := time.Since(start)
	if err == nil {
		h.Shutdown()
		t.Fatal("a host with the admin API on and no token started")
	}
	t.Logf("refused after %s: %v", took.Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), admin.TokenEnv) || !strings.Contains(err.Error(), "admin.token_file") || !strings.Contains(err.Error(), "admin.enabled: false") {
		t.Errorf("the error does not say how to give a token or turn the API off: %v", err)
	}
	if took > time.Second {
		t.Errorf("refused after %s, want at once", took)
	}

	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, name := range topics.Names() {
		if strings.Contains(name, g) {
			made = append(made, name)
		}
	}
	if len(made) > 0 {
		t.Errorf("topics created before the missing token was said: %s", strings.Join(made, ", "))
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range groups.Groups() {
		if strings.Contains(name, g) {
			t.Errorf("group %s joined before the missing token was said", name)
		}
	}
	// Topics a failed run created are deleted (the broker stays small).
	if len(made) > 0 {
		adm.DeleteTopics(context.Background(), made...)
	}
}
