// Copyright (c) 2019 The Jaeger Authors.
// Copyright (c) 2017 Uber Technologies, Inc.
// SPDX-License-Identifier: Apache-2.0

// Slim replacement for Jaeger v1.76.0 internal/storage/v1/factory/factory.go,
// copied over Jaeger's source by tests/jaeger/jaeger.sh (see
// tests/tools/jaeger/README.md). Upstream's file is the v1 binaries' storage
// factory (SPAN_STORAGE_TYPE), which links every v1 backend (Cassandra,
// Elasticsearch, Badger, Kafka, gRPC...). The v2 binary (cmd/jaeger) never
// builds it; it only reaches this package through cmd/query/app, which names
// the ArchiveStorage type below (upstream's declaration, unchanged).

package factory

import (
	"github.com/jaegertracing/jaeger/internal/storage/v1/api/spanstore"
)

// cassandraStorageType is named by upstream's config.go (the default
// SPAN_STORAGE_TYPE of the v1 binaries).
const cassandraStorageType = "cassandra"

type ArchiveStorage struct {
	Reader spanstore.Reader
	Writer spanstore.Writer
}
