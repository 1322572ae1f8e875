// Copyright (c) 2023 The Jaeger Authors.
// SPDX-License-Identifier: Apache-2.0

// Slim replacement for Jaeger v1.76.0
// cmd/jaeger/internal/extension/jaegerstorage/config.go, copied over Jaeger's
// source by tests/jaeger/jaeger.sh (see tests/tools/jaeger/README.md).
// Upstream's backend config can also name Badger, gRPC remote storage,
// Cassandra, Elasticsearch/OpenSearch and ClickHouse trace backends and
// Prometheus/Elasticsearch metric backends, which links all their clients;
// this one accepts the memory backend only (any other key, including
// metric_backends, is refused as an invalid key when the config loads).
// The memory defaults and the validation are upstream's.

package jaegerstorage

import (
	"errors"
	"fmt"
	"reflect"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/xconfmap"

	"github.com/jaegertracing/jaeger/internal/storage/v1/memory"
)

var (
	_ xconfmap.Validator  = (*Config)(nil)
	_ confmap.Unmarshaler = (*TraceBackend)(nil)
)

// Config contains configuration(s) for jaeger trace storage.
// Keys in the map are storage names that can be used to refer to them
// from other components, e.g. from jaeger_storage_exporter or jaeger_query.
type Config struct {
	TraceBackends map[string]TraceBackend `mapstructure:"backends"`
}

// TraceBackend contains configuration for a single trace storage backend.
type TraceBackend struct {
	Memory *memory.Configuration `mapstructure:"memory"`
}

// Unmarshal implements confmap.Unmarshaler to apply the memory defaults.
func (cfg *TraceBackend) Unmarshal(conf *confmap.Conf) error {
	if conf.IsSet("memory") {
		cfg.Memory = &memory.Configuration{
			MaxTraces: 1_000_000,
		}
	}
	return conf.Unmarshal(cfg)
}

func (cfg *Config) Validate() error {
	if len(cfg.TraceBackends) == 0 {
		return errors.New("at least one storage is required")
	}
	for name, b := range cfg.TraceBackends {
		empty := TraceBackend{}
		if reflect.DeepEqual(b, empty) {
			return fmt.Errorf("empty backend configuration for storage '%s'", name)
		}
	}
	return nil
}
