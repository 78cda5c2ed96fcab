package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo is what weft_build_info reports of the running binary: the
// main module's version ("(devel)" for a build from a checkout), the Go
// version that built it, and the VCS revision the go command stamped
// (with "-dirty" when the checkout was modified), so that a graph can be
// annotated with the deployments and the nodes of a cluster that run
// another build found.
type BuildInfo struct {
	Version, GoVersion, Revision string
}

// ReadBuildInfo reads the running binary's BuildInfo from
// runtime/debug.ReadBuildInfo; what the binary does not carry is
// "unknown".
func ReadBuildInfo() BuildInfo {
	bi := BuildInfo{Version: "unknown", GoVersion: runtime.Version(), Revision: "unknown"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	if info.Main.Version != "" {
		bi.Version = info.Main.Version
	}
	if info.GoVersion != "" {
		bi.GoVersion = info.GoVersion
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				bi.Revision = s.Value
			}
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && bi.Revision != "unknown" {
		bi.Revision += "-dirty"
	}
	return bi
}

// newBuildInfo returns the weft_build_info gauge: 1, labelled with the
// binary's BuildInfo (one series per binary: bounded).
func newBuildInfo() prometheus.Collector {
	bi := ReadBuildInfo()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help:        "Always 1, labelled with the binary's version, the Go version that built it and its VCS revision.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "go_version": bi.GoVersion, "revision": bi.Revision},
	}, func() float64 { return 1 })
}
