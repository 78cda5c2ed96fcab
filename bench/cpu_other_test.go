//go:build !unix

package bench

import "time"

// processCPU is not implemented here: the benchmarks report no cpu-ns/op.
func processCPU() (time.Duration, bool) { return 0, false }
