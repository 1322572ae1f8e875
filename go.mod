module github.com/wasmstream/wasmstream

go 1.26.8

require github.com/tetratelabs/wazero v1.12.0

require golang.org/x/sys v0.44.0 // indirect
