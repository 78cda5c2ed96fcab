#!/bin/sh
# Builds the three binaries of issue 40's A/B into $H/bin (default
# /tmp/h40j/bin): boltstore.test (the embedded store's package with the
# overlay of _bolt/: bbolt options from the environment, TestH40J,
# TestH40JIdle), pebble and fsync (this module). Run from anywhere;
# REPO is the weft checkout (default: the one holding this directory).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${REPO:-$(cd "$HERE/../../../.." && pwd)}
H=${H:-/tmp/h40j}
mkdir -p "$H/bin"
OVERLAY=$(REPO=$REPO OUT=$H/overlay "$HERE/_bolt/prep.sh")
(cd "$REPO" && go test -c -overlay "$OVERLAY" -o "$H/bin/boltstore.test" ./internal/store/boltstore/)
(cd "$HERE" && CGO_ENABLED=0 go build -o "$H/bin/pebble" ./pebble && go build -o "$H/bin/fsync" ./fsync)
echo "built $H/bin/boltstore.test $H/bin/pebble $H/bin/fsync"
