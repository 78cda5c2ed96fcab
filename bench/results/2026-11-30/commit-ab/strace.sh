#!/bin/bash
# The cross-check of perf's counts with strace (strace/*.txt): each commit
# at 1 writer, 2,000 commits, the whole process counted (the open and, for
# the 3-write commits, the one transaction that fills the keys to delete).
set -euo pipefail
H=${H:-/tmp/h40j}
B=$H/bin
OUT=${OUT:-$H/strace}
TRACE=trace=fdatasync,fsync,pwrite64,write,ftruncate,fallocate,sync_file_range
mkdir -p "$OUT"
for v in store:0:0 store:1:0 store:0:1 store:1:1 shape:0:0 shape:1:1 shape1:0:0 pebble; do
  d=$H/data/st; rm -rf "$d"; mkdir -p "$d"
  if [ "$v" = pebble ]; then
    strace -f -c -o "$OUT/$v.txt" -e "$TRACE" "$B/pebble" -writers 1 -commits 2000 -dir "$d" >/dev/null 2>&1
  else
    IFS=: read -r kind nfl ngs <<<"$v"
    H40J_KIND=$kind H40J_NOFREELISTSYNC=$nfl H40J_NOGROWSYNC=$ngs H40J_WRITERS=1 H40J_COMMITS=2000 H40J_DIR=$d \
      strace -f -c -o "$OUT/${v//:/-}.txt" -e "$TRACE" "$B/boltstore.test" -test.run '^TestH40J$' >/dev/null
  fi
done
rm -rf "$H/data/st"
