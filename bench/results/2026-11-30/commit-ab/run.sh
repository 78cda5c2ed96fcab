#!/bin/bash
# Issue 40's A/B: every variant at 1, 10 and 50 writers, in turns, each run
# a process of its own on a fresh directory, under perf stat counting the
# file syscalls of the timed part only. Appends one JSON line per run to
# $RESULTS. Usage: [VARIANTS=...] [WRITERS=...] run.sh ROUNDS
set -euo pipefail
ROUNDS=${1:-5}
H=${H:-/tmp/h40j}
RESULTS=${RESULTS:-$H/results.jsonl}
BOLT=$H/bin/boltstore.test
PEBBLE=$H/bin/pebble
DATA=${DATA:-$H/data}
EVENTS=syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync,syscalls:sys_enter_pwrite64,syscalls:sys_enter_write,syscalls:sys_enter_pwritev,syscalls:sys_enter_writev,syscalls:sys_enter_sync_file_range,syscalls:sys_enter_fallocate,syscalls:sys_enter_ftruncate
declare -A COMMITS=([1]=3000 [10]=10000 [50]=30000)
# VARIANTS: bbolt KIND:NOFREELISTSYNC:NOGROWSYNC, or pebble, or pebble5 (the
# same commit with 5 small index keys more).
read -r -a VARIANTS <<<"${VARIANTS:-store:0:0 store:1:0 store:0:1 store:1:1 shape:0:0 shape:1:1 shape1:0:0 pebble}"
read -r -a WRITERS <<<"${WRITERS:-1 10 50}"
mkdir -p "$DATA"
for round in $(seq "$ROUNDS"); do
  for writers in "${WRITERS[@]}"; do
    n=${#VARIANTS[@]}
    for k in $(seq 0 $((n - 1))); do
      v=${VARIANTS[$(((k + round - 1) % n))]}
      dir=$DATA/run; rm -rf "$dir"; mkdir -p "$dir"
      rm -f "$H/ctl" "$H/ack"; mkfifo "$H/ctl" "$H/ack"
      load=$(cut -d' ' -f1 /proc/loadavg)
      export H40J_PERF_CTL=$H/ctl H40J_PERF_ACK=$H/ack
      if [[ $v == pebble* ]]; then
        cmd=("$PEBBLE" -mode commit -writers "$writers" -commits "${COMMITS[$writers]}" -index-keys "$(( ${v#pebble}0 / 10 ))" -dir "$dir")
      else
        IFS=: read -r kind nfl ngs <<<"$v"
        export H40J_KIND=$kind H40J_NOFREELISTSYNC=$nfl H40J_NOGROWSYNC=$ngs H40J_WRITERS=$writers H40J_COMMITS=${COMMITS[$writers]} H40J_DIR=$dir
        cmd=("$BOLT" -test.run '^TestH40J$' -test.count 1)
      fi
      line=$(perf stat -x, -o "$H/perf.txt" --control "fifo:$H/ctl,$H/ack" -D -1 -e "$EVENTS" -- "${cmd[@]}" 2>"$H/stderr.txt" | grep '^H40J ' | cut -c6-) || { echo "run $v w=$writers failed" >&2; cat "$H/stderr.txt" >&2; exit 1; }
      perf=$(awk -F, '/syscalls:sys_enter_/ {sub("syscalls:sys_enter_", "", $3); printf "%s\"%s\":%s", (n++ ? "," : "{"), $3, ($1 ~ /^[0-9]+$/ ? $1 : "null")} END {print "}"}' "$H/perf.txt")
      echo "$line" | jq -c --argjson p "$perf" --arg v "$v" --argjson r "$round" --argjson l "$load" '. + {variant: $v, round: $r, load1: $l, sys: $p}' >>"$RESULTS"
      echo "$(date -u +%T) r$round w=$writers $v load=$load $(echo "$line" | jq -r '.commits_per_s|floor') commits/s" >&2
      unset H40J_KIND H40J_NOFREELISTSYNC H40J_NOGROWSYNC H40J_WRITERS H40J_COMMITS H40J_DIR
    done
  done
done
rm -rf "$DATA/run"
