#!/usr/bin/env bash
# Runs the benchmarks of the plugin invoke path and summarises them: the
# plugins package's own benchmarks (Invoke, InvokeParallel, WarmRestart),
# then this module's comparison of Weft with a bare wazero call (stopping
# the guest not at all, with WithCloseOnContextDone, or with Weft's
# instrumentation) and with Extism on echo (BenchmarkEcho), and with the
# bare calls on compute-bound guest code (BenchmarkCompute). All the hosts
# of a benchmark run in one process.
# BENCHMARKS.md at the repository's root records the figures.
#
#	bench/run.sh                           # or: make bench
#	ROUNDS=10 bench/run.sh                 # more rounds
#	PLUGINS=0 BENCH=Compute bench/run.sh   # only BenchmarkCompute
#	ROUNDS=1 BENCHTIME=2x bench/run.sh     # a quick check that it all works
#
# The test binaries are built once and then run ROUNDS times (default 8)
# with -test.count 1, one after the other: every round runs every contender
# once, so that the machine's drift (it is shared) spreads over all of them
# instead of falling on whichever ran last. The summary gives medians over
# the rounds, and each ratio both as the ratio of the medians and as the
# median of the ratios within a round. Besides wall time (ns/op) the bench
# module reports the process's CPU time per call (cpu-ns/op: user + system
# of all its threads, from getrusage), which time spent waiting for a core
# does not inflate.
#
# Raw results and summaries go to bench/work/results/ (git-ignored). Needs Go
# and the Go module proxy only: the plugins are built with stock Go by the
# benchmarks themselves, and benchstat comes from the proxy at a pinned
# version. Run it on an otherwise idle machine; it warns when it is not.
set -euo pipefail

bench=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$bench")
out=$bench/work/results
rounds=${ROUNDS:-${COUNT:-8}}
benchtime=${BENCHTIME:-1s}
filter=${BENCH:-.} # the bench module's -test.bench
with_plugins=${PLUGINS:-1}
benchstat_version=v0.0.0-20260908200009-22c9c6c9d4da # golang.org/x/perf

mkdir -p "$out" "$bench/work/bin"
echo "== installing benchstat ($benchstat_version)"
GOBIN=$bench/work/bin go install "golang.org/x/perf/cmd/benchstat@$benchstat_version"
benchstat=$bench/work/bin/benchstat

# Build the test binaries before measuring anything, so that the compiler
# never competes with a benchmark.
echo "== building"
(cd "$bench" && go vet ./... && go test -c -o work/bench.test .)
if [ "$with_plugins" != 0 ]; then
	(cd "$root" && go test -c -o "$bench/work/plugins.test" ./plugins)
fi

{
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "go: $(go version)"
	echo "nproc: $(nproc)"
	lscpu | grep -E '^(Model name|Architecture|CPU\(s\)|Thread\(s\) per core|L3 cache):' || true
	free -h 2>/dev/null | awk 'NR<=2' || true
	echo "rounds: $rounds, benchtime: $benchtime, bench: $filter, plugins: $with_plugins"
	echo "loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt"
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN { exit !(l > 0.5) }'; then
	echo "WARNING: load average $load: something else is running; wall times will be noisy (compare cpu-ns/op and ratios)" >&2
fi

: >"$out/plugins.txt"
: >"$out/bench.txt"
for round in $(seq "$rounds"); do
	if [ "$with_plugins" != 0 ]; then
		echo "== round $round/$rounds: plugins.test -test.bench . -test.count 1 -test.benchtime $benchtime -test.benchmem"
		(cd "$root/plugins" && "$bench/work/plugins.test" -test.run '^$' -test.bench . -test.count 1 \
			-test.benchtime "$benchtime" -test.benchmem -test.timeout 30m) | tee -a "$out/plugins.txt"
	fi
	echo "== round $round/$rounds: bench.test -test.bench '$filter' -test.count 1 -test.benchtime $benchtime -test.benchmem"
	(cd "$bench" && work/bench.test -test.run '^$' -test.bench "$filter" -test.count 1 \
		-test.benchtime "$benchtime" -test.benchmem -test.timeout 60m) | tee -a "$out/bench.txt"
	echo "loadavg after round $round: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
done

cd "$out"
if [ "$with_plugins" != 0 ]; then
	"$benchstat" plugins.txt >plugins.stat
fi
"$benchstat" -col /host bench.txt >bench.stat

# The ratios: medians over the rounds, in wall time and in CPU time, and each
# ratio as the ratio of the medians and, in parentheses, as the median of the
# ratios within each round (a round has one line per benchmark, so the i-th
# lines of two benchmarks are from the same round). The targets: weft within
# 1.5x of bare on echo at 100 B, within 1.3x at 64 KiB and on compute; at
# least 25x faster than Extism bounded on echo.
ratios='
/^Benchmark/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++) {
		u = $(i + 1)
		if (u == "ns/op" || u == "cpu-ns/op" || u == "ms/op") {
			k = name SUBSEP u
			n[k]++
			v[k, n[k]] = $i
		}
	}
}

# median returns the median of the n values a[1..n], which it sorts.
function median(a, n,    i, j, x) {
	for (i = 2; i <= n; i++) {
		x = a[i]
		for (j = i - 1; j >= 1 && a[j] > x; j--)
			a[j + 1] = a[j]
		a[j + 1] = x
	}
	if (n == 0)
		return ""
	if (n % 2)
		return a[(n + 1) / 2]
	return (a[n / 2] + a[n / 2 + 1]) / 2
}

function med(name, unit,    k, a, i) {
	k = name SUBSEP unit
	for (i = 1; i <= n[k]; i++)
		a[i] = v[k, i]
	return median(a, n[k] + 0)
}

# paired returns the median over the rounds of num over den.
function paired(num, den, unit,    kn, kd, a, i, m) {
	kn = num SUBSEP unit
	kd = den SUBSEP unit
	m = n[kn] < n[kd] ? n[kn] : n[kd]
	for (i = 1; i <= m; i++)
		a[i] = v[kn, i] / v[kd, i]
	return median(a, m + 0)
}

# ratio formats num over den: the ratio of the medians (the median of the
# ratios within each round).
function ratio(num, den, unit,    a, b) {
	a = med(num, unit)
	b = med(den, unit)
	if (a == "" || b == "")
		return sprintf("%-17s", "-")
	return sprintf("%6.2fx (%6.2fx)", a / b, paired(num, den, unit))
}

# t formats the median of name in unit.
function t(name, unit,    x) {
	x = med(name, unit)
	if (x == "")
		return sprintf("%10s", "-")
	if (x >= 1e6)
		return sprintf("%8.2fms", x / 1e6)
	return sprintf("%8.2fus", x / 1e3)
}

END {
	split("ns/op cpu-ns/op", units, " ")
	split("100B 64KiB", sizes, " ")
	split("upper-64KiB resize-800x600", works, " ")
	e = "BenchmarkEcho/host="
	c = "BenchmarkCompute/host="
	for (ui = 1; ui <= 2; ui++) {
		u = units[ui]
		what = u == "ns/op" ? "wall time (ns/op)" : "CPU time (cpu-ns/op)"
		printf "echo, %s, medians of %d rounds; ratios: of the medians (median of per-round ratios)\n", what, n[e "weft/size=100B" SUBSEP u]
		printf "%-6s %10s %10s %10s %10s %10s %10s\n", "size", "weft", "bare", "bare-close", "bare-instr", "extism", "ext-bound"
		for (si = 1; si <= 2; si++) {
			s = "/size=" sizes[si]
			printf "%-6s %s %s %s %s %s %s\n", sizes[si],
				t(e "weft" s, u), t(e "bare" s, u), t(e "bare-close" s, u), t(e "bare-instr" s, u), t(e "extism" s, u), t(e "extism-bounded" s, u)
		}
		printf "%-6s   %-17s %-17s %-17s %-17s %-17s %s\n", "size", "weft/bare", "bare-close/bare", "bare-instr/bare", "weft/bare-instr", "extism/weft", "ext-bound/weft"
		for (si = 1; si <= 2; si++) {
			s = "/size=" sizes[si]
			printf "%-6s   %s %s %s %s %s %s\n", sizes[si],
				ratio(e "weft" s, e "bare" s, u), ratio(e "bare-close" s, e "bare" s, u), ratio(e "bare-instr" s, e "bare" s, u),
				ratio(e "weft" s, e "bare-instr" s, u), ratio(e "extism" s, e "weft" s, u), ratio(e "extism-bounded" s, e "weft" s, u)
		}
		printf "\ncompute, %s, medians of %d rounds\n", what, n[c "weft/work=upper-64KiB" SUBSEP u]
		printf "%-15s %10s %10s %10s %10s\n", "work", "weft", "bare", "bare-close", "bare-instr"
		for (wi = 1; wi <= 2; wi++) {
			w = "/work=" works[wi]
			printf "%-15s %s %s %s %s\n", works[wi], t(c "weft" w, u), t(c "bare" w, u), t(c "bare-close" w, u), t(c "bare-instr" w, u)
		}
		printf "%-15s   %-17s %-17s %-17s %-17s %s\n", "work", "weft/bare", "bare-close/bare", "bare-instr/bare", "weft/bare-instr", "bare-close/weft"
		for (wi = 1; wi <= 2; wi++) {
			w = "/work=" works[wi]
			printf "%-15s   %s %s %s %s %s\n", works[wi],
				ratio(c "weft" w, c "bare" w, u), ratio(c "bare-close" w, c "bare" w, u), ratio(c "bare-instr" w, c "bare" w, u),
				ratio(c "weft" w, c "bare-instr" w, u), ratio(c "bare-close" w, c "weft" w, u)
		}
		print ""
	}
	print "targets: weft/bare <= 1.5x (echo 100B), <= 1.3x (echo 64KiB, compute); ext-bound/weft >= 25x"
	x = med("BenchmarkWarmRestart", "ms/op")
	if (x != "")
		printf "warm restart: %.1f ms per plugin (median of %d; target <= 50 ms)\n", x, n["BenchmarkWarmRestart" SUBSEP "ms/op"]
}'
awk "$ratios" bench.txt plugins.txt | tee ratios.txt

if [ "$with_plugins" != 0 ]; then
	echo
	echo "== plugins (medians of $rounds rounds)"
	cat plugins.stat
fi
echo
echo "== weft vs bare wazero vs Extism (medians of $rounds rounds; \"vs base\" is against weft)"
cat bench.stat
echo
echo "results in ${out#"$root"/}/: plugins.txt bench.txt (raw), *.stat (benchstat), ratios.txt, machine.txt"
