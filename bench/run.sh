#!/usr/bin/env bash
# Runs the benchmarks of the plugin invoke path and summarises them with
# benchstat (medians of COUNT runs): the plugins package's own benchmarks
# (Invoke, InvokeParallel, WarmRestart), then this module's comparison of
# Weft with a bare wazero call and with Extism, all three in one process.
# BENCHMARKS.md at the repository's root records the figures.
#
#	bench/run.sh                 # or: make bench
#	COUNT=10 bench/run.sh        # more runs per benchmark
#	COUNT=1 BENCHTIME=100x bench/run.sh   # a quick check that it all works
#
# Raw results and summaries go to bench/work/results/ (git-ignored). Needs Go
# and the Go module proxy only: the plugins are built with stock Go by the
# benchmarks themselves, and benchstat comes from the proxy at a pinned
# version. Run it on an otherwise idle machine; it warns when it is not.
set -euo pipefail

bench=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$bench")
out=$bench/work/results
count=${COUNT:-6}
benchtime=${BENCHTIME:-1s}
benchstat_version=v0.0.0-20260908200009-22c9c6c9d4da # golang.org/x/perf

mkdir -p "$out" "$bench/work/bin"
echo "== installing benchstat ($benchstat_version)"
GOBIN=$bench/work/bin go install "golang.org/x/perf/cmd/benchstat@$benchstat_version"
benchstat=$bench/work/bin/benchstat

# Build the test binaries before measuring anything, so that the compiler
# never competes with a benchmark.
echo "== building"
(cd "$root" && go test -run '^$' -count 1 ./plugins >/dev/null)
(cd "$bench" && go vet ./... && go test -run '^$' -count 1 . >/dev/null)

{
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "go: $(go version)"
	echo "nproc: $(nproc)"
	lscpu | grep -E '^(Model name|Architecture|CPU\(s\)|Thread\(s\) per core|L3 cache):' || true
	free -h 2>/dev/null | awk 'NR<=2' || true
	echo "loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt"
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN { exit !(l > 0.5) }'; then
	echo "WARNING: load average $load: something else is running; the figures will be noisy" >&2
fi

echo "== go test -run '^\$' -bench . -count $count -benchtime $benchtime -benchmem ./plugins"
(cd "$root" && go test -run '^$' -bench . -count "$count" -benchtime "$benchtime" -benchmem -timeout 30m ./plugins) | tee "$out/plugins.txt"
echo "== (cd bench && go test -run '^\$' -bench . -count $count -benchtime $benchtime -benchmem .)"
(cd "$bench" && go test -run '^$' -bench . -count "$count" -benchtime "$benchtime" -benchmem -timeout 30m .) | tee "$out/bench.txt"
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"

cd "$out"
"$benchstat" plugins.txt >plugins.stat
"$benchstat" -col /host bench.txt >bench.stat

# medians FILE UNIT prints "name median" for each benchmark of FILE in UNIT,
# without the -GOMAXPROCS suffix.
medians() {
	"$benchstat" -format csv "$1" 2>/dev/null | awk -F, -v unit="$2" '
		$2 == unit { on = 1; next }
		on && ($1 == "" || $1 == "geomean") { on = 0 }
		on { name = $1; sub(/-[0-9]+$/, "", name); print name, $2 }'
}
{
	medians bench.txt sec/op
	medians plugins.txt ms/op | sed 's/^/ms /'
} | awk '
	$1 == "ms" { restart[$2] = $3; next }
	{ t[$1] = $2 }
	END {
		printf "%-6s %10s %10s %10s %10s   %-16s %-16s %s\n", "size", "weft", "bare", "extism", "ext-bound", "weft/bare", "extism/weft", "ext-bound/weft"
		n = split("100B 64KiB", sizes, " ")
		for (i = 1; i <= n; i++) {
			s = sizes[i]
			w = t["Echo/host=weft/size=" s]; b = t["Echo/host=bare/size=" s]
			e = t["Echo/host=extism/size=" s]; eb = t["Echo/host=extism-bounded/size=" s]
			if (w == "" || b == "" || e == "" || eb == "") { print "missing results for " s; bad = 1; continue }
			printf "%-6s %8.2fµs %8.2fµs %8.2fµs %8.2fµs   %5.2fx (≤1.3)    %5.1fx (≥25)     %5.1fx (≥25)\n", s, w * 1e6, b * 1e6, e * 1e6, eb * 1e6, w / b, e / w, eb / w
		}
		for (k in restart) printf "warm restart: %.1f ms per plugin (target ≤ 50 ms)\n", restart[k]
		exit bad
	}' | tee ratios.txt

echo
echo "== plugins (medians of $count runs)"
cat plugins.stat
echo
echo "== weft vs bare wazero vs Extism (medians of $count runs; \"vs base\" is against weft)"
cat bench.stat
echo
echo "results in ${out#"$root"/}/: plugins.txt bench.txt (raw), *.stat (benchstat), ratios.txt, machine.txt"
