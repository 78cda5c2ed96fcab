package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
	"github.com/weftworks/weft/plugins/grant"
)

// The local plugin commands run a plugin in the host's sandbox without a
// server: for plugin authors.

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

func pluginCall(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("weft plugin call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	input := fs.String("input", "", "the input document, or @FILE")
	attempt := fs.Int("attempt", 1, "the attempt number")
	last := fs.String("last-heartbeat", "", "details of a previous attempt")
	timeout := fs.Duration("timeout", 30*time.Second, "the call's deadline")
	var grants grantFlags
	grants.add(fs)
	if len(args) < 2 {
		usage(stderr)
		return exitUsage
	}
	file, activity := args[0], args[1]
	if err := fs.Parse(args[2:]); err != nil {
		return exitUsage
	}
	set := grants.set()
	if err := set.Check(); err != nil {
		fmt.Fprintf(stderr, "weft: -host, -config, -secret: %s\n", strings.TrimPrefix(err.Error(), grant.ErrInvalid.Error()+": "))
		return exitUsage
	}
	if grants.private && len(grants.hosts) == 0 {
		fmt.Fprintln(stderr, "weft: -private-networks applies to the -host rules; give at least one")
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
		Grants:        set,
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
