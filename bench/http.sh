#!/usr/bin/env bash
# Measures Weft as users drive it: over HTTP, from a separate process
# (bench/load), against a `weft serve` on the embedded store and against
# one on Redis. Each round starts a fresh host on a fresh data dir and runs
# every scenario once; the summary gives each figure's median over the
# rounds, with its range. BENCHMARKS.md ("Throughput over HTTP") records
# the figures.
#
#	bench/http.sh                  # or: make bench-http
#	ROUNDS=5 bench/http.sh         # more rounds (default 3)
#	N=500 WARMUP=50 bench/http.sh  # a quick check that it all works
#	STORES=embedded bench/http.sh  # only the embedded store
#	STORES="embedded temporal" bench/http.sh  # Weft against Temporal's dev server
#	STORES="embedded dbos" bench/http.sh      # Weft against DBOS Transact on Postgres
#	STORES="redis redis-partitioned cluster cluster-partitioned" bench/http.sh
#	                               # the whole store and PARTITIONS (16) partitions,
#	                               # on one redis-server and on a Redis Cluster of
#	                               # three masters (no replicas; SHARDS, 4, queue shards)
#	STORES="embedded embedded+trace=1 embedded+trace=0.01 embedded+trace=down" bench/http.sh
#	                               # tracing off, on at 100% and 1% sampling into a
#	                               # collector (bench/otlpsink), and on at 100% with
#	                               # the collector down (nothing listening)
#
# Scenarios (seq3: three kit.echo steps; sleep3: three kit.sleep steps of
# 100 ms each):
#   seq3, 50 in flight (closed loop)       the throughput figure
#   seq3, 1 in flight                      the latency of one workflow
#   seq3, open loop at RATE/s (wrk2-style) latency under a steady arrival rate
#   sleep3, 200 in flight                  concurrency: activities that wait
# With "temporal" among the stores, each round also runs seq3 (50 in flight
# and 1 in flight, a tenth of N) on Temporal's dev server (SQLite file) with
# a Go worker in the load process (bench/temporal), so that the ratio comes
# from the same rounds on the same machine; its first run builds the
# Temporal CLI from the Go module proxy (several minutes).
# With "dbos" among the stores, each round also runs seq3 (50 in flight
# and, a tenth of N, 1 in flight) on DBOS Transact for Go (bench/dbos),
# the workflows in the load process as DBOS runs them, on a Postgres
# started for the round on a fresh data dir and a loopback port (fsync and
# synchronous_commit on, Postgres's defaults otherwise); its CPU per
# workflow is the DBOS process's plus every Postgres process's.
# Needs Go, redis-server and postgresql (make deps) and the example
# plugins (make plugins).
set -euo pipefail

bench=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$bench")
out=$bench/work/results
rounds=${ROUNDS:-3}
n=${N:-2000}
warmup=${WARMUP:-200}
rate=${RATE:-500}
stores=${STORES:-"embedded redis"}
partitions=${PARTITIONS:-16}
shards=${SHARDS:-4}
mkdir -p "$out"
results=$out/http.jsonl
: >"$results"

echo "== building"
(cd "$root" && make --no-print-directory build plugins >/dev/null)
(cd "$bench" && go build -o work/load ./load && go build -o work/otlpsink ./otlpsink)
case " $stores " in
*" temporal "*)
	(cd "$bench/temporal" && go build -o ../work/bin/temporal github.com/temporalio/cli/cmd/temporal && go build -o ../work/temporal-load .)
	;;
esac
pg_bin=
case " $stores " in
*" dbos "*)
	(cd "$bench/dbos" && go build -o ../work/dbos-load .)
	# Postgres's server programs: on PATH, or the newest of Debian's
	# /usr/lib/postgresql/<version>/bin (which its package does not put
	# on PATH).
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		pg_bin=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
	else
		pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	fi
	if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ] || [ ! -x "$pg_bin/pg_ctl" ]; then
		echo "no Postgres server found (initdb, pg_ctl); make deps installs Debian's postgresql" >&2
		exit 1
	fi
	;;
esac
weft=$root/bin/weft
load=$bench/work/load

{
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "go: $(go version)"
	echo "nproc: $(nproc)"
	lscpu | grep -E '^(Model name|CPU\(s\)):' || true
	echo "rounds: $rounds, n: $n, warmup: $warmup, rate: $rate/s, stores: $stores (partitions: $partitions, cluster shards: $shards)"
	[ -n "$pg_bin" ] && echo "postgres: $("$pg_bin/pg_ctl" --version) ($pg_bin)"
	echo "loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/http-machine.txt"

work=$(mktemp -d)
host_pid=
redis_pids=()
redis_addrs=
temporal_pid=
postgres_pid=
postgres_port=
sink_pid=
cleanup() {
	stop_postgres
	[ -n "$host_pid" ] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null
	[ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null && wait "$sink_pid" 2>/dev/null
	[ -n "$temporal_pid" ] && kill "$temporal_pid" 2>/dev/null && wait "$temporal_pid" 2>/dev/null
	for pid in ${redis_pids[@]+"${redis_pids[@]}"}; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT

# free_port prints a free loopback port.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# await_ready waits for the host's /readyz, for up to a minute.
await_ready() {
	for _ in $(seq 600); do
		if curl -fs "http://127.0.0.1:$1/readyz" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	echo "the host on port $1 did not become ready; its log:" >&2
	cat "$work/host.log" >&2
	return 1
}

# start_redis DIR [ARGS...] starts a redis-server with AOF (appendfsync
# everysec) on a free port in DIR and prints nothing; its address is
# appended to redis_addrs.
start_redis() {
	local dir=$1 port
	shift
	mkdir -p "$dir"
	port=$(free_port)
	# A cluster node listens on its port + 10000 too (the cluster bus).
	while [ "$port" -gt 55000 ]; do port=$(free_port); done
	redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --appendonly yes \
		--appendfsync everysec --save '' --daemonize no "$@" >"$dir/redis.log" 2>&1 &
	redis_pids+=($!)
	for _ in $(seq 100); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	redis_addrs=${redis_addrs:+$redis_addrs,}127.0.0.1:$port
}

# start_cluster starts a Redis Cluster of three masters without replicas
# and waits until every master says cluster_state:ok.
start_cluster() {
	local i addr
	for i in 1 2 3; do
		start_redis "$work/redis/m$i" --cluster-enabled yes --cluster-config-file nodes.conf
	done
	if ! redis-cli --cluster create ${redis_addrs//,/ } --cluster-yes >"$work/redis/create.log" 2>&1; then
		cat "$work/redis/create.log" >&2
		return 1
	fi
	for addr in ${redis_addrs//,/ }; do
		for _ in $(seq 100); do
			redis-cli -h "${addr%:*}" -p "${addr#*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
			sleep 0.1
		done
	done
}

# start_host STORE starts a weft serve on a fresh data dir: on the embedded
# store; or a fresh redis-server (redis, redis-partitioned) or Redis
# Cluster (cluster, cluster-partitioned), the store whole or in PARTITIONS
# partitions. A suffix +trace=R turns tracing on at sample rate R into a
# fresh bench/otlpsink; +trace=down at rate 1 into a port nothing listens on.
start_host() {
	local store=${1%%+*} trace= port
	case $1 in
	*+trace=*) trace=${1#*+trace=} ;;
	esac
	rm -rf "$work/data" "$work/redis"
	mkdir -p "$work/data" "$work/redis"
	port=$(free_port)
	local args=(serve --listen "127.0.0.1:$port" --data-dir "$work/data")
	redis_addrs=
	case $store in
	redis | redis-partitioned)
		start_redis "$work/redis"
		args+=(--store redis --redis-addr "$redis_addrs")
		;;
	cluster | cluster-partitioned)
		start_cluster
		args+=(--store redis --redis-cluster "$redis_addrs" --set "redis.shards=$shards")
		;;
	esac
	case $store in
	*-partitioned) args+=(--set "redis.partitions=$partitions") ;;
	esac
	if [ "$trace" = down ]; then
		args+=(--set tracing.exporter=otlp --set "tracing.endpoint=http://127.0.0.1:$(free_port)")
	elif [ -n "$trace" ]; then
		local sink_port
		sink_port=$(free_port)
		"$bench/work/otlpsink" -listen "127.0.0.1:$sink_port" >>"$out/otlpsink.log" 2>&1 &
		sink_pid=$!
		args+=(--set tracing.exporter=otlp --set "tracing.sample_rate=$trace" --set "tracing.endpoint=http://127.0.0.1:$sink_port")
	fi
	"$weft" "${args[@]}" >"$work/host.log" 2>&1 &
	host_pid=$!
	await_ready "$port"
	server=http://127.0.0.1:$port
}

stop_host() {
	kill "$host_pid" && wait "$host_pid" || true
	host_pid=
	if [ -n "$sink_pid" ]; then
		kill "$sink_pid" && wait "$sink_pid" || true
		sink_pid=
	fi
	for pid in ${redis_pids[@]+"${redis_pids[@]}"}; do
		kill "$pid" && wait "$pid" || true
	done
	redis_pids=()
}

# pg_user prints the user Postgres runs as: Postgres's server refuses
# root, so as root it is the package's postgres user (or nobody);
# otherwise the user running the benchmark.
pg_user() {
	if [ "$(id -u)" -ne 0 ]; then
		id -un
	elif id -u postgres >/dev/null 2>&1; then
		echo postgres
	else
		echo nobody
	fi
}

# as_postgres runs a command as pg_user.
as_postgres() {
	if [ "$(id -u)" -ne 0 ]; then
		"$@"
		return
	fi
	local user
	user=$(pg_user)
	setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups "$@"
}

# start_postgres DIR initialises a fresh Postgres cluster in DIR/data and
# starts it on a free loopback port (its socket in DIR), durable as Weft
# is (fsync, synchronous_commit); it sets postgres_port and postgres_pid
# (the postmaster's, from postmaster.pid).
start_postgres() {
	local dir=$1
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$(id -u)" -eq 0 ]; then
		# The postgres user must reach DIR through $work (mode 700).
		chmod 711 "$work"
		chown "$(pg_user)" "$dir"
	fi
	if ! as_postgres "$pg_bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1; then
		echo "initdb in $dir/data failed:" >&2
		cat "$dir/initdb.log" >&2
		return 1
	fi
	postgres_port=$(free_port)
	if ! as_postgres "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
		-o "-h 127.0.0.1 -p $postgres_port -k $dir -c fsync=on -c synchronous_commit=on" start >/dev/null; then
		echo "Postgres in $dir/data did not start; its log:" >&2
		cat "$dir/postgres.log" >&2
		return 1
	fi
	postgres_pid=$(head -n 1 "$dir/data/postmaster.pid")
}

# stop_postgres stops the Postgres that start_postgres started, if any (a
# fast shutdown: SIGINT to the postmaster), and waits until it has gone.
stop_postgres() {
	[ -n "$postgres_pid" ] || return 0
	kill -INT "$postgres_pid" 2>/dev/null || true
	for _ in $(seq 600); do
		kill -0 "$postgres_pid" 2>/dev/null || break
		sleep 0.1
	done
	postgres_pid=
}

# run_dbos runs the seq3 scenarios on DBOS Transact on a fresh Postgres.
# DBOS's connection pool keeps its default (20 connections): 4, 5, 10
# and 50 were no faster here (BENCHMARKS.md).
run_dbos() {
	start_postgres "$work/pg"
	local dl=("$bench/work/dbos-load" -database-url "postgres://postgres@127.0.0.1:$postgres_port/dbos_bench?sslmode=disable"
		-postgres-pid "$postgres_pid" -json "$results")
	"${dl[@]}" -label "dbos: seq3, 50 in flight" -n "$n" -warmup "$warmup" -concurrency 50
	"${dl[@]}" -label "dbos: seq3, 1 in flight" -n $((n / 10)) -warmup $((warmup / 10)) -concurrency 1
	stop_postgres
}

# run_temporal runs the seq3 scenarios on a fresh Temporal dev server.
run_temporal() {
	local port
	rm -rf "$work/temporal"
	mkdir -p "$work/temporal"
	port=$(free_port)
	"$bench/work/bin/temporal" server start-dev --headless --ip 127.0.0.1 --port "$port" \
		--http-port "$(free_port)" --metrics-port "$(free_port)" \
		--db-filename "$work/temporal/temporal.db" --log-level error >"$work/temporal.log" 2>&1 &
	temporal_pid=$!
	for _ in $(seq 600); do
		if "$bench/work/bin/temporal" operator cluster health --address "127.0.0.1:$port" 2>/dev/null | grep -q SERVING; then
			break
		fi
		sleep 0.1
	done
	local tl=("$bench/work/temporal-load" -address "127.0.0.1:$port" -server-pid "$temporal_pid" -json "$results")
	"${tl[@]}" -label "temporal: seq3, 50 in flight" -n $((n / 10)) -warmup $((warmup / 4)) -concurrency 50
	"${tl[@]}" -label "temporal: seq3, 1 in flight" -n $((n / 40)) -warmup $((warmup / 20)) -concurrency 1
	kill "$temporal_pid" && wait "$temporal_pid" || true
	temporal_pid=
}

for round in $(seq "$rounds"); do
	for store in $stores; do
		echo "== round $round/$rounds: $store"
		if [ "$store" = temporal ]; then
			run_temporal
			continue
		fi
		if [ "$store" = dbos ]; then
			run_dbos
			continue
		fi
		start_host "$store"
		common=(-server "$server" -json "$results" -warmup "$warmup")
		redis=()
		if [ -n "$redis_addrs" ]; then
			redis=(-redis "$redis_addrs")
		fi
		"$load" "${common[@]}" "${redis[@]}" -setup -plugin "$root/bin/plugins/kit.wasm" \
			-label "$store: seq3, 50 in flight" -workflow seq3 -n "$n" -concurrency 50
		"$load" "${common[@]}" "${redis[@]}" -label "$store: seq3, 1 in flight" -workflow seq3 \
			-n $((n / 4)) -warmup $((warmup / 4)) -concurrency 1
		"$load" "${common[@]}" "${redis[@]}" -label "$store: seq3, open loop $rate/s" -workflow seq3 -n "$n" -rate "$rate"
		# Its warm-up is as long as its measure: every one of the 200
		# guest instances it needs is created before it is measured.
		"$load" "${common[@]}" "${redis[@]}" -label "$store: sleep3 (3 × 100 ms), 200 in flight" -workflow sleep3 \
			-n $((n / 2)) -warmup $((n / 2)) -concurrency 200
		stop_host
	done
	echo "loadavg after round $round: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/http-machine.txt"
done

echo
echo "== medians of $rounds rounds (range in parentheses); raw results in $results"
"$load" -summarize "$results" | tee "$out/http-summary.md"
