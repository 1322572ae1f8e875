// Copyright (c) 2023 The Jaeger Authors.
// SPDX-License-Identifier: Apache-2.0

// Slim replacement for Jaeger v1.76.0 cmd/jaeger/main.go, copied over
// Jaeger's source by tests/jaeger/jaeger.sh (see tests/tools/jaeger/README.md).
// Upstream also registers the `es-mappings` subcommand, which links the
// Elasticsearch storage packages; the tests only run the collector command.

package main

import (
	"log"

	"github.com/spf13/viper"

	"github.com/jaegertracing/jaeger/cmd/internal/docs"
	"github.com/jaegertracing/jaeger/cmd/jaeger/internal"
	"github.com/jaegertracing/jaeger/internal/config"
	"github.com/jaegertracing/jaeger/internal/version"
)

func main() {
	v := viper.New()
	command := internal.Command()
	command.AddCommand(version.Command())
	command.AddCommand(docs.Command(v))
	config.AddFlags(
		v,
		command,
	)

	if err := command.Execute(); err != nil {
		log.Fatal(err)
	}
}
