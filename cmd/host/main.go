// Command weft is the Weft host and its command-line client.
//
// Today it offers the plugin author's local commands, which run a plugin in
// the same sandbox the host uses, without a server:
//
//	weft plugin check FILE.wasm
//	weft plugin call FILE.wasm ACTIVITY [-input JSON|@FILE] [-attempt N] [-timeout D] [-config k=v]...
//
// `weft serve` starts the host once the workflow engine and the HTTP API are
// in place.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
)

// Exit codes that scripts can test.
const (
	exitOK       = 0
	exitFailed   = 1 // the activity failed or the plugin was refused
	exitUsage    = 2
	exitInternal = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "plugin":
		if len(args) < 2 {
			usage(stderr)
			return exitUsage
		}
		switch args[1] {
		case "check":
			return pluginCheck(ctx, args[2:], stdout, stderr)
		case "call":
			return pluginCall(ctx, args[2:], stdout, stderr)
		}
	case "config":
		return configCmd(args[1:], os.Environ(), stdout, stderr)
	case "serve":
		fmt.Fprintln(stderr, "weft serve: the workflow engine and HTTP API are not built yet; "+
			"use `weft plugin check` and `weft plugin call` to run plugins locally")
		return exitFailed
	case "help", "-h", "--help":
		usage(stdout)
		return exitOK
	}
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  weft plugin check FILE.wasm
      validate a plugin against the ABI and list its activities
  weft plugin call FILE.wasm ACTIVITY [flags]
      run one activity call in the host's sandbox and print its output
      -input JSON|@FILE   the input document (default null)
      -attempt N          the attempt number the plugin sees (default 1)
      -last-heartbeat JSON  details of a previous attempt
      -config KEY=VALUE   a configuration value (repeatable)
      -timeout D          the call's deadline (default 30s)
`)
}

// localRuntime returns a runtime whose blob store and cache live in a
// temporary directory removed by the returned cleanup.
func localRuntime(ctx context.Context, stderr io.Writer) (*plugins.Runtime, func(), error) {
	dir, err := os.MkdirTemp("", "weft-plugin-*")
	if err != nil {
		return nil, nil, err
	}
	blobs, err := blobfile.New(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Compiled code is cached across runs: compiling a Go plugin takes a
	// second or more, loading it from the cache about 50 ms.
	var cacheDir string
	if d, err := os.UserCacheDir(); err == nil {
		cacheDir = filepath.Join(d, "weft", "compiled")
	}
	rt, err := plugins.New(ctx, plugins.Config{PoolSize: 1, Logger: logger, CacheDir: cacheDir}, blobs)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return rt, func() { _ = rt.Close(context.Background()); os.RemoveAll(dir) }, nil
}

func loadFile(ctx context.Context, rt *plugins.Runtime, path string, stderr io.Writer) (*plugins.Module, int) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return nil, exitUsage
	}
	m, err := rt.Load(ctx, wasm)
	var ve *plugins.ValidationError
	if errors.As(err, &ve) {
		fmt.Fprintf(stderr, "%s: refused:\n", path)
		for _, p := range ve.Problems {
			fmt.Fprintf(stderr, "  - %s\n", p)
		}
		return nil, exitFailed
	}
	if err != nil {
		fmt.Fprintf(stderr, "weft: loading %s: %v\n", path, err)
		return nil, exitInternal
	}
	return m, exitOK
}

func pluginCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		usage(stderr)
		return exitUsage
	}
	rt, cleanup, err := localRuntime(ctx, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return exitInternal
	}
	defer cleanup()
	m, code := loadFile(ctx, rt, args[0], stderr)
	if m == nil {
		return code
	}
	fmt.Fprintf(stdout, "%s: ABI v%d, %d bytes, version %s\n", args[0], abi.Version, m.Size, m.Version)
	for _, a := range m.Activities {
		fmt.Fprintf(stdout, "  %-20s %s\n", a.Name, a.Description)
	}
	return exitOK
}

type configFlag map[string]string

func (c configFlag) String() string { return fmt.Sprint(map[string]string(c)) }

func (c configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	c[k] = v
	return nil
}

func pluginCall(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("weft plugin call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	input := fs.String("input", "", "the input document, or @FILE")
	attempt := fs.Int("attempt", 1, "the attempt number")
	last := fs.String("last-heartbeat", "", "details of a previous attempt")
	timeout := fs.Duration("timeout", 30*time.Second, "the call's deadline")
	config := configFlag{}
	fs.Var(config, "config", "KEY=VALUE (repeatable)")
	if len(args) < 2 {
		usage(stderr)
		return exitUsage
	}
	file, activity := args[0], args[1]
	if err := fs.Parse(args[2:]); err != nil {
		return exitUsage
	}
	in := []byte(*input)
	if strings.HasPrefix(*input, "@") {
		var err error
		if in, err = os.ReadFile((*input)[1:]); err != nil {
			fmt.Fprintf(stderr, "weft: -input: %v\n", err)
			return exitUsage
		}
	}
	rt, cleanup, err := localRuntime(ctx, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return exitInternal
	}
	defer cleanup()
	m, code := loadFile(ctx, rt, file, stderr)
	if m == nil {
		return code
	}
	callCtx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	deadline, _ := callCtx.Deadline()
	hb := plugins.NewHeartbeat(time.Now())
	out, err := rt.Invoke(callCtx, m.Version, plugins.Call{
		Activity:      activity,
		Input:         in,
		Info:          abi.Info{InstanceID: "local", Workflow: "local", StepID: "local", Plugin: strings.TrimSuffix(filepath.Base(file), ".wasm"), Attempt: *attempt, IdempotencyKey: "local/" + activity, DeadlineUnixMilli: deadline.UnixMilli()},
		LastHeartbeat: []byte(*last),
		Config:        config,
		Heartbeat:     hb,
	})
	if details, _, beats := hb.Last(); beats > 0 {
		fmt.Fprintf(stderr, "heartbeats: %d, last details: %s\n", beats, details)
	}
	if err == nil {
		err = plugins.CheckOutput(out)
	}
	if err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return exitOK
}
