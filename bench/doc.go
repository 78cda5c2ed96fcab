// Package bench compares Weft's plugin invoke path with bare wazero calls
// through the same ABI (with nothing to stop the guest, with wazero's
// WithCloseOnContextDone, and with Weft's instrumentation) and with Extism:
// an echo call at two sizes (BenchmarkEcho) and compute-bound guest code,
// the kit's upper and the thumbnail plugin's resize (BenchmarkCompute),
// and the kit's upper end to end in a host beside the same call through
// the runtime and bare wazero, in turns (BenchmarkUpperInTurns). It
// is a module of its own so that Extism's dependencies stay out of Weft's
// go.mod; it has only benchmarks. run.sh runs them with the plugins
// package's benchmarks in interleaved rounds and summarises them, and
// BENCHMARKS.md at the repository's root records the figures.
package bench
