#!/usr/bin/env bash
# Installs the Debian packages that building the plugins and running the
# tests need, when they are missing: wabt (wat2wasm) for the hand-written
# WAT test modules, clang + lld + wasi-libc + compiler-rt for the C plugin,
# rustc + cargo + the wasm32 standard library + serde_json's sources for the
# Rust plugins (built offline, with Debian's toolchain in /usr/bin),
# redis-server for the cluster tests, chromium for the console's browser
# tests, postgresql for bench/http.sh's DBOS peer (STORES=dbos; an install
# whose initdb and pg_ctl are on PATH, or in /usr/lib/postgresql/*/bin,
# will do). Without root (or password-less sudo)
# it names the packages and fails.
set -euo pipefail

need=()
command -v wat2wasm >/dev/null 2>&1 || need+=(wabt)
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v wasm-ld >/dev/null 2>&1 || need+=(lld)
[ -f /usr/include/wasm32-wasi/stdlib.h ] || need+=(wasi-libc)
compgen -G '/usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a' >/dev/null || need+=(libclang-rt-dev-wasm32)
[ -x /usr/bin/rustc ] || need+=(rustc)
[ -x /usr/bin/cargo ] || need+=(cargo)
[ -d /usr/lib/rustlib/wasm32-wasi ] || need+=(libstd-rust-dev-wasm32)
compgen -G '/usr/share/cargo/registry/serde_json-*' >/dev/null || need+=(librust-serde-json-dev)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
{ command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; } ||
	compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || need+=(postgresql)

[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
else
	echo "missing Debian packages: ${need[*]}" >&2
	echo "install them with: sudo apt-get install -y ${need[*]}" >&2
	exit 1
fi
echo "installing Debian packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >/dev/null
if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
	echo "could not install the Debian packages: ${need[*]}" >&2
	exit 1
fi
# redis-server's package starts a system service on 6379; the tests start
# their own servers on free ports and need none.
if [[ " ${need[*]} " == *" redis-server "* ]]; then
	"${sudo[@]}" systemctl disable --now redis-server >/dev/null 2>&1 || "${sudo[@]}" service redis-server stop >/dev/null 2>&1 || true
fi
# So does postgresql's, on 5432; the benchmark starts its own cluster.
if [[ " ${need[*]} " == *" postgresql "* ]]; then
	"${sudo[@]}" systemctl disable --now postgresql >/dev/null 2>&1 || "${sudo[@]}" service postgresql stop >/dev/null 2>&1 || true
fi
