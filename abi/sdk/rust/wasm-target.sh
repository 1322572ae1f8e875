#!/bin/sh
# Prints the Rust toolchain and WASI target that build wasmstream guests, as
# "BINDIR TARGET" (cargo and rustc of BINDIR, cargo build --target TARGET),
# or explains on stderr what to install and exits 1.
#
#   1. The rustc on PATH (rustup's, Rust >= 1.78) with wasm32-wasip1, the
#      name current toolchains give the WASI target (rustc --print
#      target-list); its standard library installed (rustup target list
#      --installed, or any toolchain: <sysroot>/lib/rustlib/<target>/lib).
#   2. An older rustc on PATH that knows only wasm32-wasi, with it installed.
#   3. Offline fallback: Debian's toolchain (/usr/bin/rustc 1.63, cargo and
#      libstd-rust-dev-wasm32; target wasm32-wasi). It builds crate-free
#      code; it cannot read lock files of version 4 and has no sparse index,
#      so crates from crates.io (serde_json) need the rustup toolchain.
# The wasmstream Makefile, the host's tests and projects made by
# wasmstream init all use this script, so they agree.
has_std() { # rustc target
	sysroot=$("$1" --print sysroot 2>/dev/null) && [ -d "$sysroot/lib/rustlib/$2/lib" ]
}
rustc=$(command -v rustc 2>/dev/null)
target=wasm32-wasip1
if [ -n "$rustc" ]; then
	"$rustc" --print target-list 2>/dev/null | grep -qx wasm32-wasip1 || target=wasm32-wasi
	if has_std "$rustc" "$target"; then
		echo "$(dirname "$rustc") $target"
		exit 0
	fi
fi
hint="rustup target add wasm32-wasip1"
command -v rustup >/dev/null 2>&1 || hint="install Rust with rustup (https://rustup.rs), then: rustup target add wasm32-wasip1"
if [ "$rustc" != /usr/bin/rustc ] && [ -x /usr/bin/cargo ] && has_std /usr/bin/rustc wasm32-wasi; then
	if [ -n "$rustc" ]; then
		echo "note: $rustc has no $target standard library; building with Debian's /usr/bin/rustc (wasm32-wasi, no crates.io crates). For the current toolchain: $hint" >&2
	fi
	echo "/usr/bin wasm32-wasi"
	exit 0
fi
if [ -n "$rustc" ] && [ "$target" = wasm32-wasip1 ]; then
	echo "error: the Rust toolchain ($rustc) has no wasm32-wasip1 standard library. Run: $hint" >&2
elif [ -n "$rustc" ]; then
	echo "error: $rustc has no wasm32-wasi standard library (Debian: apt-get install libstd-rust-dev-wasm32), or: $hint" >&2
else
	echo "error: no Rust toolchain (rustc) on PATH: $hint (offline, Debian: apt-get install rustc cargo libstd-rust-dev-wasm32)" >&2
fi
exit 1
