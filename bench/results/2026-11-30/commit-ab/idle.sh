#!/bin/bash
# Open time and RSS of the two databases at rest (summary.md, "Open and
# idle"): a store file and a Pebble directory of 30,000 commits from 50
# writers, then 3 rounds in turns of opening each (and a new one) and
# staying idle 3 s. Appends to $H/idle.jsonl. Binaries from build.sh.
set -euo pipefail
H=${H:-/tmp/h40j}
B=$H/bin
D=$H/data/idle
rm -rf "$D" && mkdir -p "$D"/{bolt00,bolt11,bolt10,pebble}
for v in 00 11 10; do
  H40J_KIND=store H40J_NOFREELISTSYNC=${v:0:1} H40J_NOGROWSYNC=${v:1:1} H40J_WRITERS=50 H40J_COMMITS=30000 \
    H40J_DIR=$D/bolt$v "$B/boltstore.test" -test.run '^TestH40J$' | grep -o '"file_bytes":[0-9]*'
done
"$B/pebble" -writers 50 -commits 30000 -dir "$D/pebble" 2>/dev/null >/dev/null
sync
for r in 1 2 3; do
  rm -rf "$D/fresh-bolt" "$D/fresh-pebble"; mkdir -p "$D/fresh-bolt" "$D/fresh-pebble"
  for v in fresh-bolt bolt00 bolt10 fresh-pebble pebble; do
    case $v in
      *pebble) "$B/pebble" -mode idle -idle 3s -dir "$D/$v" 2>/dev/null ;;
      bolt10) H40J_NOFREELISTSYNC=1 H40J_DIR=$D/$v H40J_IDLE_MS=3000 "$B/boltstore.test" -test.run '^TestH40JIdle$' ;;
      *) H40J_DIR=$D/$v H40J_IDLE_MS=3000 "$B/boltstore.test" -test.run '^TestH40JIdle$' ;;
    esac | grep '^H40J' | cut -c6- | jq -c --arg v "$v" --argjson r "$r" '. + {variant: $v, round: $r}' >>"$H/idle.jsonl"
  done
done
