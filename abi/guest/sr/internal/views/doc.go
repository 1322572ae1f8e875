// Package views holds the codec of abi/guest/sr's testdata/all.avsc
// generated with `--strings view --timestamps int64`, and its tests: the
// same bytes and values as the resolving path, strings that are views of
// the decoded bytes, and no allocation a record.
package views

//go:generate go run ../../../../../cmd/wasmstream gen avro --lang go --package views --strings view --timestamps int64 --out all_avro.go ../../testdata/all.avsc
