//go:build !wasip1

package main

func badPointer() { panic("badptr: only meaningful inside the WASM host") }
