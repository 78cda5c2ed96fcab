package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weftworks/weft/host/config"
)

// hostFlags are the flags of `weft serve` and `weft config`: a few named
// ones for the common keys and --set KEY=VALUE for any key. The keys, their
// defaults and their checks are host/config's.
type hostFlags struct {
	fs     *flag.FlagSet
	config string
	// keys maps a named flag to its key.
	keys map[string]string
	// set holds the --set values in the order given.
	set []config.Flag
}

// setFlag is --set KEY=VALUE.
type setFlag struct{ h *hostFlags }

func (f setFlag) String() string { return "" }

// Set records one KEY=VALUE.
func (f setFlag) Set(s string) error {
	key, value, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	f.h.set = append(f.h.set, config.Flag{Key: key, Name: "set", Value: value})
	return nil
}

func newHostFlags(name string, stderr io.Writer) *hostFlags {
	h := &hostFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError), keys: map[string]string{}}
	h.fs.SetOutput(stderr)
	h.fs.StringVar(&h.config, "config", "", "the configuration `FILE` (default: weft.yaml in the working directory, when present)")
	for _, f := range []struct {
		name, key, usage string
		list             bool
	}{
		{"listen", "listen", "the HTTP `ADDRESS` (default 127.0.0.1:8080)", false},
		{"data-dir", "data_dir", "the data `DIR` (default ./data)", false},
		{"node-id", "node_id", "this node's `ID` (default: the host name and the process id)", false},
		{"store", "store", "embedded or redis (default embedded)", false},
		{"redis-addr", "redis_addrs", "a Redis `HOST:PORT` (repeatable, or a comma list)", true},
		{"redis-cluster", "redis_cluster", "a Redis Cluster seed `HOST:PORT` (repeatable, or a comma list)", true},
		{"workflows-dir", "workflows_dir", "the `DIR` that admin refresh reads definitions from", false},
		{"seed", "seed_dirs", "a `DIR` of plugins (*.wasm) and workflows (*.yaml) to load on a first start (repeatable)", true},
		{"log-level", "log.level", "debug, info, warn or error (default info)", false},
		{"log-format", "log.format", "text or json (default text)", false},
	} {
		h.keys[f.name] = f.key
		if f.list {
			// Its values are read joined with commas, as the
			// environment writes a list.
			h.fs.Var(new(listFlag), f.name, f.usage)
		} else {
			h.fs.String(f.name, "", f.usage)
		}
	}
	h.fs.Var(setFlag{h}, "set", "set any configuration `KEY=VALUE` (repeatable), e.g. --set engine.workers=8")
	return h
}

// sources returns the configuration layers for these flags: the named
// flags given on the command line (not those left at their defaults,
// which are the configuration's), then --set's.
func (h *hostFlags) sources(dir string, env []string) config.Sources {
	var flags []config.Flag
	h.fs.Visit(func(f *flag.Flag) {
		if key := h.keys[f.Name]; key != "" {
			flags = append(flags, config.Flag{Key: key, Name: f.Name, Value: f.Value.String()})
		}
	})
	return config.Sources{File: h.config, Dir: dir, Env: env, Flags: append(flags, h.set...)}
}

// configCmd is `weft config [flags]`: it prints the effective
// configuration, or what is wrong with it.
func configCmd(args []string, env []string, stdout, stderr io.Writer) int {
	h := newHostFlags("weft config", stderr)
	if err := h.fs.Parse(args); err != nil {
		return exitUsage
	}
	if h.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "weft config: unexpected argument %q\n", h.fs.Arg(0))
		return exitUsage
	}
	dir, _ := os.Getwd()
	cfg, err := config.Load(h.sources(dir, env))
	if err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return exitFailed
	}
	if cfg.File != "" {
		fmt.Fprintf(stdout, "# configuration file: %s\n", cfg.File)
	}
	if err := cfg.Print(stdout); err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return exitInternal
	}
	return exitOK
}
