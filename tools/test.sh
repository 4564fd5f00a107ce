#!/usr/bin/env bash
# Install everything the tests need (Debian packages, pip packages) and run the whole suite.
# This is the README's test command and what CI runs (.ci/run).
#   PYKBROKER_QUICK=1  skip the long matrices (everyday runs); CI runs the full suite.
#   PYKBROKER_FULL_MATRIX=1  also the cluster repeats of client scenarios (tests/full_matrix.py).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

# Debian packages: kcat (librdkafka's CLI, a real client in the matrix), zookeeper, a JDK, Maven.
need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
# A JDK (17 on Debian 12) and Maven for the Java kafka-clients scenarios in compat/java (tests/java).
command -v javac >/dev/null 2>&1 || need_apt+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
# ZooKeeper 3.8 for the multi-broker cluster (pykbroker cluster up, tests/cluster): its jars run
# in a child JVM (pykbroker/local/zookeeper.py); the package's service is not used.
[ -e /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
# iproute2 and iptables for the network-partition runs (compat/chaos/netns.py, tests/chaos):
# each broker in its own network namespace, links cut with iptables DROP rules inside them.
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)
# A C/C++ toolchain and the libraries librdkafka links against, for compat/node's
# @confluentinc/kafka-javascript (built from source by npm ci, see below; zstd for its zstd codec).
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v make >/dev/null 2>&1 || need_apt+=(make)
for dev in libssl-dev zlib1g-dev libzstd-dev; do
  dpkg -s "$dev" >/dev/null 2>&1 || need_apt+=("$dev")
done
# MIT Kerberos for the SASL/GSSAPI tests (tests/security/test_gssapi.py): a real KDC
# (krb5-kdc, krb5-admin-server: krb5kdc, kdb5_util, kadmin.local; run per test by
# pykbroker/testing/kdc.py, the packages' own services unused), kinit (krb5-user), the headers
# the gssapi package builds against (libkrb5-dev), and cyrus-sasl's GSSAPI plugin for kcat
# (libsasl2-modules-gssapi-mit).  Only as root (or with sudo): elsewhere the tests skip, saying so.
if [ "$(id -u)" = "0" ] || [ -n "$SUDO" ]; then
  for pkg in krb5-kdc krb5-admin-server krb5-user libkrb5-dev libsasl2-modules-gssapi-mit; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
  done
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# Python: the broker itself (editable) plus test dependencies.
python3 -m pip install -q --disable-pip-version-check -e ".[test]"
# the kerberos extra (gssapi) builds against libkrb5-dev: only where it is installed
if command -v krb5-config >/dev/null 2>&1; then
  python3 -m pip install -q --disable-pip-version-check -e ".[kerberos]" || \
    echo "tools/test.sh: the gssapi package did not build: tests/security/test_gssapi.py will be skipped" >&2
else
  echo "tools/test.sh: no libkrb5-dev (krb5-config): the GSSAPI tests (tests/security/test_gssapi.py) will be skipped" >&2
fi

# Go: the client scenarios of compat/go (franz-go; tests/go), dependencies fetched from the Go module
# proxy as go.mod/go.sum pin them.  Built here so a broken module fails early and loudly; without a
# Go toolchain tests/go skips, saying so.
GO="$(command -v go || true)"
[ -z "$GO" ] && [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go
if [ -n "$GO" ]; then
  (cd compat/go && "$GO" build -o "${TMPDIR:-/tmp}/pykbroker-go-bin/" ./...)
else
  echo "tools/test.sh: no Go toolchain found: the Go client scenarios (tests/go) will be skipped" >&2
fi

# Node.js: the client scenarios of compat/node (kafkajs, @confluentinc/kafka-javascript; tests/node),
# packages from the npm registry exactly as package-lock.json pins them (npm ci).  Installed again
# only when the lock file changed since the last install (its hash kept in node_modules); without
# node and npm tests/node skips, saying so (a failure under CI=true, tests/needs.py).
# CKJS_LINKING=dynamic: the Confluent client's prebuilt binary comes from GitHub releases and its
# default source build downloads zlib/OpenSSL/zstd/curl sources from their sites; "dynamic" builds
# librdkafka against the Debian -dev packages installed above, so only the registries are needed.
if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  # The packages live in a cache outside the clone, one directory per lock-file hash, and
  # compat/node/node_modules points there: a fresh clone with an unchanged lock file reuses the
  # compiled client instead of building librdkafka again.
  lock_sum="$(sha256sum compat/node/package-lock.json | cut -d' ' -f1)"
  node_cache="${XDG_CACHE_HOME:-$HOME/.cache}/pykbroker/node/$lock_sum"
  if [ "$(cat "$node_cache/node_modules/.pykbroker-lock" 2>/dev/null)" != "$lock_sum" ]; then
    rm -rf "$node_cache" "$node_cache.rc" "$node_cache.log" && mkdir -p "$node_cache"
    cp compat/node/package.json compat/node/package-lock.json "$node_cache/"
    # The Confluent client compiles its bundled librdkafka (about 4 minutes on 2 busy cores): the
    # build runs in the background beside the suite's first directories, and tests/node and the
    # kafkajs differential test wait for its exit status (PYKBROKER_NODE_BUILD_RC) before judging.
    export PYKBROKER_NODE_BUILD_RC="$node_cache.rc"
    ( set +e
      (cd "$node_cache" && CKJS_LINKING=dynamic npm ci --no-audit --no-fund) >"$node_cache.log" 2>&1
      status=$?
      [ "$status" = 0 ] && echo "$lock_sum" > "$node_cache/node_modules/.pykbroker-lock"
      echo "$status" > "$node_cache.rc.tmp" && mv "$node_cache.rc.tmp" "$node_cache.rc"
    ) </dev/null &
  fi
  if [ "$(readlink compat/node/node_modules 2>/dev/null)" != "$node_cache/node_modules" ]; then
    rm -rf compat/node/node_modules
    ln -s "$node_cache/node_modules" compat/node/node_modules
  fi
else
  echo "tools/test.sh: no node/npm found: the Node client scenarios (tests/node) will be skipped" >&2
fi

# Apache Kafka's jars (the oracle of tests/differential, tests/tools, tests/configs and the
# record checks of tests/groups) from Maven Central into ~/.cache/pykbroker, before pytest: in
# CI a test that finds them missing fails (tests/needs.py) instead of skipping.
python3 compat/kafka/oracle.py fetch >/dev/null
# Apache Kafka's kafka-acls.sh (its tools jars), which librdkafka's own tests call (tests/librdkafka).
python3 compat/librdkafka/suite.py fetch-tools >/dev/null

# The type check of pykbroker/ ([tool.mypy] in pyproject.toml): a type error fails the run before
# the suite starts.  About 20 s on a cold cache, under 1 s warm (the cache lives outside the clone).
python3 -m mypy --cache-dir "${XDG_CACHE_HOME:-$HOME/.cache}/pykbroker/mypy"

# -p no:cacheprovider keeps a clean clone clean; durations show where the time goes; -rs lists
# every skip with its reason (only genuinely absent platform features skip in CI).
exec python3 -m pytest -p no:cacheprovider --durations=60 -rs "$@"
