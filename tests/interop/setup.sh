#!/usr/bin/env bash
# A Python with Confluent's client and serializers (requirements.txt) for
# the interop test, installed once into $WASMSTREAM_CACHE/py (default
# ~/.cache/wasmstream/py) and reinstalled when requirements.txt changes.
# Prints INTEROP_PYTHON=<interpreter> on stdout; diagnostics go to stderr
# prefixed "setup.sh:". Fails, naming what is missing, when there is no
# python3 or the packages cannot be installed: the test command runs the
# interop test, which does not pass without them.
#
# A python3 without the venv module (Debian's python3 without
# python3-venv) gets the packages with pip --target and a wrapper that
# sets PYTHONPATH.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

CACHE_ROOT="${WASMSTREAM_CACHE:-$HOME/.cache/wasmstream}"
DIR="$CACHE_ROOT/py"
log() { printf 'setup.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

py="${PYTHON:-python3}"
command -v "$py" >/dev/null 2>&1 || die "$py not found: install Python 3.9+ (Debian: apt-get install python3 python3-venv)"
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' || die "$("$py" --version 2>&1) is older than 3.9, which confluent-kafka needs"
want="$(sha256sum requirements.txt | cut -c1-16) $("$py" --version 2>&1)"
MARKER="$DIR/.installed"
if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$want" && -x "$DIR/bin/python" ]]; then
    printf 'INTEROP_PYTHON=%s\n' "$DIR/bin/python"
    exit 0
fi
rm -rf "$DIR"
mkdir -p "$CACHE_ROOT"
if "$py" -m venv "$DIR" >/dev/null 2>&1 && [[ -x "$DIR/bin/pip" ]]; then
    log "installing $(grep -v '^#' requirements.txt) into the venv $DIR"
    "$DIR/bin/pip" install -q --disable-pip-version-check -r requirements.txt >&2 ||
        { rm -rf "$DIR"; die "pip could not install requirements.txt into $DIR (is PyPI reachable?)"; }
else
    rm -rf "$DIR"
    "$py" -m pip --version >/dev/null 2>&1 || die "$py has neither the venv module nor pip (Debian: apt-get install python3-venv)"
    log "no venv module: installing $(grep -v '^#' requirements.txt) with pip --target $DIR/lib"
    "$py" -m pip install -q --disable-pip-version-check --target "$DIR/lib" -r requirements.txt >&2 ||
        { rm -rf "$DIR"; die "pip could not install requirements.txt into $DIR/lib (is PyPI reachable?)"; }
    mkdir -p "$DIR/bin"
    printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s" "$@"\n' "$DIR/lib" "$(command -v "$py")" >"$DIR/bin/python"
    chmod +x "$DIR/bin/python"
fi
"$DIR/bin/python" -c 'import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.protobuf, confluent_kafka.schema_registry.json_schema' ||
    { rm -rf "$DIR"; die "installed, but the serializers do not import"; }
printf '%s' "$want" >"$MARKER"
log "installed $("$DIR/bin/python" -c 'import confluent_kafka; print("confluent-kafka", confluent_kafka.__version__)')"
printf 'INTEROP_PYTHON=%s\n' "$DIR/bin/python"
