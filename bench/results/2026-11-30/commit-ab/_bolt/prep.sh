#!/bin/sh
# Builds the overlay for the bbolt runs of issue 40 from the checkout at $REPO
# (default /work/main): boltstore.go with bbolt's NoFreelistSync and
# NoGrowSync taken from H40J_NOFREELISTSYNC / H40J_NOGROWSYNC ("1" = on), plus
# the two harness files. Writes $OUT (default /tmp/h40j/overlay)/overlay.json.
set -eu
REPO=${REPO:-/work/main}
OUT=${OUT:-/tmp/h40j/overlay}
HERE=$(cd "$(dirname "$0")" && pwd)
PKG=$REPO/internal/store/boltstore
mkdir -p "$OUT"
sed 's/^\t\tFreelistType: bolt.FreelistMapType,$/&\n\t\tNoFreelistSync: h40jEnv("H40J_NOFREELISTSYNC"),\n\t\tNoGrowSync:     h40jEnv("H40J_NOGROWSYNC"),/' \
	"$PKG/boltstore.go" >"$OUT/boltstore.go"
gofmt -w "$OUT/boltstore.go"
grep -q 'H40J_NOGROWSYNC' "$OUT/boltstore.go" || { echo "prep.sh: bolt.Options line not found in $PKG/boltstore.go" >&2; exit 1; }
cat >"$OUT/overlay.json" <<JSON
{"Replace": {
  "$PKG/boltstore.go": "$OUT/boltstore.go",
  "$PKG/zz_h40j.go": "$HERE/zz_h40j.go",
  "$PKG/zz_h40j_test.go": "$HERE/zz_h40j_test.go"
}}
JSON
echo "$OUT/overlay.json"
