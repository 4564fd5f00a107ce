#!/usr/bin/env bash
# Build and run the Java kafka-clients compatibility scenarios.
#   compat/java/run.sh build [kafka39|kafka4 ...]      compile (default: both profiles)
#   compat/java/run.sh <profile> <scenario> <bootstrap> [key=value ...]
# Dependencies come from Maven Central into ~/.m2 on the first build; later builds run offline.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

build() {
  local profile="$1"
  # Offline first (everything cached in ~/.m2), online only when something is missing.
  mvn -q -o -B -f "$here/pom.xml" -P "$profile" compile \
    || mvn -q -B -f "$here/pom.xml" -P "$profile" compile
}

if [ "${1:-}" = "build" ]; then
  shift
  profiles=("$@")
  [ ${#profiles[@]} -gt 0 ] || profiles=(kafka39 kafka4)
  for p in "${profiles[@]}"; do build "$p"; done
  exit 0
fi

profile="$1"; shift
t="$here/target/$profile"
[ -f "$t/classpath.txt" ] || build "$profile"
exec java -cp "$t/classes:$(cat "$t/classpath.txt")" pykbroker.compat.Main "$@"
