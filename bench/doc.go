// Package bench compares Weft's plugin invoke path with a bare wazero call
// through the same ABI and with Extism, at two sizes of an echo call. It is
// a module of its own so that Extism's dependencies stay out of Weft's
// go.mod; it has only benchmarks. run.sh runs them with the plugins
// package's benchmarks and summarises both with benchstat, and
// BENCHMARKS.md at the repository's root records the figures.
package bench
