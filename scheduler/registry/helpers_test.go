package registry

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testConfig(brokers []string, prefix, host string) Config {
	return Config{Base: []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("test")}, Prefix: prefix, HostID: host, MaxModuleBytes: 64 << 20}
}

// moduleRecords are wasm's chunks as PutModule writes them.
func moduleRecords(topic string, wasm []byte) []*kgo.Record {
	digest := digestOf(wasm)
	n := (len(wasm) + ChunkBytes - 1) / ChunkBytes
	var out []*kgo.Record
	for i := range n {
		out = append(out, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%s/%d/%d", digest, i, n), Value: wasm[i*ChunkBytes : min(len(wasm), (i+1)*ChunkBytes)]})
	}
	return out
}

func deployRecord(t *testing.T, topic string, d Deployment) *kgo.Record {
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(d.Pipeline), Value: b}
}
