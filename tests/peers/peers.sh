#!/usr/bin/env bash
# Builds a Java peer wasmstream is benchmarked against: fetches its jars from
# Maven Central (tests/peers/<peer>/pom.xml) and compiles its sources with
# javac into the cache. Prints the classpath to run it with:
#
#   cp="$(bash tests/peers/peers.sh build streams)"; java -cp "$cp" wasmstream.peers.StreamsUppercase ...
#
# Peers: streams (Kafka Streams 4.4.0), pc (Confluent Parallel Consumer 0.5.3.3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${WASMSTREAM_CACHE:-$HOME/.cache/wasmstream}/peers"
say() { printf 'peers.sh: %s\n' "$*" >&2; }

[[ "${1:-}" == build && -n "${2:-}" && -f "$here/${2:-}/pom.xml" ]] || { echo "usage: peers.sh build streams|pc" >&2; exit 2; }
peer="$2"
command -v mvn >/dev/null || { say "maven (mvn) is not installed"; exit 1; }
command -v javac >/dev/null || { say "javac is not installed (openjdk-17-jdk-headless)"; exit 1; }
src="$here/$peer"
fp="$(cat "$src/pom.xml" $(find "$src/src" -name '*.java' | sort) | sha256sum | cut -c1-16)"
out="$cache/$peer-$fp"
if [[ ! -f "$out/.built" ]]; then
    say "fetching $peer's jars from Maven Central and compiling it"
    rm -rf "$out" && mkdir -p "$out/classes"
    mvn -q -B -f "$src/pom.xml" dependency:copy-dependencies -DoutputDirectory="$out/lib" >&2
    javac -nowarn -d "$out/classes" -cp "$out/lib/*" $(find "$src/src" -name '*.java') >&2
    touch "$out/.built"
fi
echo "$out/classes:$out/lib/*"
