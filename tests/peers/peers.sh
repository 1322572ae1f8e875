#!/usr/bin/env bash
# Builds the Java peers wasmstream is benchmarked against: fetches their jars
# from Maven Central (pom.xml) and compiles the sources with javac into the
# cache. Prints the classpath to run them with:
#
#   cp="$(bash tests/peers/peers.sh build)"; java -cp "$cp" wasmstream.peers.StreamsUppercase ...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${WASMSTREAM_CACHE:-$HOME/.cache/wasmstream}/peers"
say() { printf 'peers.sh: %s\n' "$*" >&2; }

cmd="${1:-build}"
[[ "$cmd" == build ]] || { echo "usage: peers.sh build" >&2; exit 2; }
command -v mvn >/dev/null || { say "maven (mvn) is not installed"; exit 1; }
command -v javac >/dev/null || { say "javac is not installed (openjdk-17-jdk-headless)"; exit 1; }
fp="$(cat "$here/pom.xml" "$here"/src/main/java/wasmstream/peers/*.java | sha256sum | cut -c1-16)"
out="$cache/$fp"
if [[ ! -f "$out/.built" ]]; then
    say "fetching the peers' jars from Maven Central and compiling them"
    rm -rf "$out" && mkdir -p "$out/classes"
    mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$out/lib" >&2
    javac -nowarn -d "$out/classes" -cp "$out/lib/*" "$here"/src/main/java/wasmstream/peers/*.java >&2
    touch "$out/.built"
fi
echo "$out/classes:$out/lib/*"
