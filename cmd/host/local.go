package main

import (
	"context"
	"encoding/json"
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
	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
	"github.com/weftworks/weft/plugins/tape"
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
	if asksForHelp(args) {
		fmt.Fprint(stdout, "usage: weft plugin check FILE.wasm\n\nValidates a plugin against the ABI and lists its activities.\n")
		return exitOK
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: weft plugin check FILE.wasm")
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

// callResult is what `weft plugin call -o json` prints: everything a test
// of a plugin asserts on. sdk/plugintest decodes it; the two are one
// contract, documented in the SDK's README.
type callResult struct {
	Activity string `json:"activity"`
	// Output is the activity's result, absent when it failed.
	Output json.RawMessage `json:"output,omitempty"`
	// Failure is why it failed, as the engine classifies it, absent when
	// it succeeded.
	Failure *callFailure `json:"failure,omitempty"`
	// Logs are the records the guest logged (log host function, stdout,
	// stderr) and the host's notes on its HTTP requests, in order.
	Logs []callLog `json:"logs"`
	// Heartbeats are the details of each heartbeat the guest sent, in
	// order; null for one sent without details.
	Heartbeats []json.RawMessage `json:"heartbeats"`
	// Requests are the guest's outbound HTTP requests, in order, as the
	// engine records them in history (no query, no headers: they may hold
	// secrets).
	Requests []call.Request `json:"requests"`
}

type callFailure struct {
	// Kind is "activity" when the guest reported the failure, and what the
	// host saw otherwise: timeout, trap, limit, protocol, cancelled,
	// unknown_activity, not_granted, host.
	Kind      string          `json:"kind"`
	Code      string          `json:"code"`
	Message   string          `json:"message,omitempty"`
	Retryable bool            `json:"retryable"`
	Details   json.RawMessage `json:"details,omitempty"`
}

type callLog struct {
	Level   string `json:"level"`
	Source  string `json:"source"`
	Message string `json:"message"`
}

func pluginCall(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-replay" || args[0] == "--replay" || strings.HasPrefix(args[0], "-replay=") || strings.HasPrefix(args[0], "--replay=")) {
		return pluginReplay(ctx, args, stdout, stderr)
	}
	fs := flag.NewFlagSet("weft plugin call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	input := fs.String("input", "", "the input `document` (JSON), or @FILE")
	attempt := fs.Int("attempt", 1, "the attempt `number` the plugin sees")
	last := fs.String("last-heartbeat", "", "the heartbeat `details` (JSON) of a previous attempt")
	timeout := fs.Duration("timeout", 30*time.Second, "the call's `deadline`")
	cancelAt := fs.Uint64("cancel-at-heartbeat", 0, "request cancellation when heartbeat `N` arrives (0: never)")
	output := fs.String("o", "text", "output: text (the output document) or json (output, failure, logs, heartbeats, requests)")
	var grants grantFlags
	grants.add(fs)
	const synopsis = "usage: weft plugin call FILE.wasm ACTIVITY [flags]"
	if asksForHelp(args) {
		fmt.Fprintf(stdout, "%s\n\nRuns one activity call in the host's sandbox, without a server.\nweft plugin call --replay BUNDLE [--plugin FILE.wasm] replays a bundled attempt (weft attempt export) instead.\n\nflags:\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	if len(args) < 2 || strings.HasPrefix(args[0], "-") || strings.HasPrefix(args[1], "-") {
		fmt.Fprintf(stderr, "%s (weft plugin call -h lists the flags)\n", synopsis)
		return exitUsage
	}
	file, activity := args[0], args[1]
	fs.Usage = func() { fmt.Fprintf(stderr, "%s (weft plugin call -h lists the flags)\n", synopsis) }
	if err := fs.Parse(args[2:]); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "weft: plugin call: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "weft: plugin call: -o must be text or json, got %q\n", *output)
		return exitUsage
	}
	if err := grants.check(); err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return exitUsage
	}
	set := grants.set()
	if err := set.Check(); err != nil {
		fmt.Fprintf(stderr, "weft: -host, -config, -secret: %s\n", strings.TrimPrefix(err.Error(), grant.ErrInvalid.Error()+": "))
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
	if len(in) > 0 && !json.Valid(in) {
		fmt.Fprintln(stderr, "weft: -input: not a JSON document")
		return exitUsage
	}
	if *last != "" && !json.Valid([]byte(*last)) {
		fmt.Fprintln(stderr, "weft: -last-heartbeat: not a JSON document")
		return exitUsage
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

	res := callResult{Activity: activity, Logs: []callLog{}, Heartbeats: []json.RawMessage{}, Requests: []call.Request{}}
	callCtx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	deadline, _ := callCtx.Deadline()
	hb := call.NewHeartbeat(time.Now())
	// The guest's goroutine runs these callbacks, one at a time.
	hb.OnBeat(func(details []byte, n uint64) {
		d := json.RawMessage("null")
		if details != nil {
			d = append(json.RawMessage(nil), details...)
		}
		res.Heartbeats = append(res.Heartbeats, d)
		if n == *cancelAt {
			hb.RequestCancel()
		}
	})
	c := call.Call{
		Activity:      activity,
		Input:         in,
		Info:          abi.Info{InstanceID: "local", Workflow: "local", StepID: "local", Plugin: strings.TrimSuffix(filepath.Base(file), ".wasm"), Attempt: *attempt, IdempotencyKey: "local/" + activity, DeadlineUnixMilli: deadline.UnixMilli()},
		LastHeartbeat: []byte(*last),
		Grants:        set,
		Heartbeat:     hb,
	}
	if *output == "json" {
		c.Log = func(r call.Record) {
			res.Logs = append(res.Logs, callLog{Level: r.LevelName(), Source: r.Source, Message: r.Message})
		}
		c.Requested = func(r call.Request) { res.Requests = append(res.Requests, r) }
	}
	out, err := rt.Invoke(callCtx, m.Version, c)
	if err == nil {
		err = call.CheckOutput(out)
	}
	if err != nil {
		f := node.ClassifyCall(err)
		res.Failure = &callFailure{Kind: f.Kind, Code: f.Code, Retryable: f.Retryable, Message: err.Error()}
		var ge *call.GuestError
		if errors.As(err, &ge) {
			res.Failure.Message, res.Failure.Details = ge.Message, ge.Details
		}
	} else {
		res.Output = out
	}

	if *output == "json" {
		b, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintf(stderr, "weft: %v\n", err)
			return exitInternal
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		if n := len(res.Heartbeats); n > 0 {
			fmt.Fprintf(stderr, "heartbeats: %d, last details: %s\n", n, res.Heartbeats[n-1])
		}
		if err != nil {
			fmt.Fprintf(stderr, "weft: %v\n", err)
		} else {
			fmt.Fprintf(stdout, "%s\n", out)
		}
	}
	if res.Failure != nil {
		return exitFailed
	}
	return exitOK
}

// pluginReplay is weft plugin call --replay BUNDLE [--plugin FILE.wasm]:
// it replays a recorded attempt that weft attempt export bundled, offline,
// in the local runtime: the bundle's module (or the candidate --plugin)
// runs the attempt's activity with its input, answered from its tape, and
// the report says how the replay compares with the recording, as weft
// attempt replay prints it. Exit 0 when it ended as recorded, 1 otherwise.
func pluginReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("weft plugin call --replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bundlePath := fs.String("replay", "", "a `BUNDLE` that weft attempt export wrote")
	candidate := fs.String("plugin", "", "a candidate module `FILE.wasm` to run in place of the bundle's")
	timeout := fs.Duration("timeout", 30*time.Second, "the call's `deadline`")
	output := fs.String("o", "text", "output: text or json (the report)")
	const synopsis = "usage: weft plugin call --replay BUNDLE [--plugin FILE.wasm] [-timeout D] [-o text|json]"
	if asksForHelp(args) {
		fmt.Fprintf(stdout, "%s\n\nReplays a bundled attempt offline, answered from its tape.\n\nflags:\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	fs.Usage = func() { fmt.Fprintln(stderr, synopsis) }
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 || *bundlePath == "" || (*output != "text" && *output != "json") {
		fmt.Fprintln(stderr, synopsis)
		return exitUsage
	}
	data, err := readCandidate(*bundlePath)
	if err != nil {
		fmt.Fprintf(stderr, "weft: --replay: %v\n", err)
		return exitUsage
	}
	b, at, err := tape.UnmarshalBundle(data)
	if err != nil {
		fmt.Fprintf(stderr, "weft: --replay %s: %v\n", *bundlePath, err)
		return exitFailed
	}
	rt, cleanup, err := localRuntime(ctx, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return exitInternal
	}
	defer cleanup()
	wasm := b.Module
	if *candidate != "" {
		if wasm, err = readCandidate(*candidate); err != nil {
			fmt.Fprintf(stderr, "weft: --plugin: %v\n", err)
			return exitUsage
		}
	}
	m, err := rt.Load(ctx, wasm)
	if err != nil {
		fmt.Fprintf(stderr, "weft: loading the module to replay: %v\n", err)
		return exitFailed
	}
	if !m.Has(at.Activity) {
		fmt.Fprintf(stderr, "weft: the module (version %s) has no activity %q\n", shortHash(m.Version), at.Activity)
		return exitFailed
	}
	// The bundle names no instance: the report and the guest's info say
	// "replay", attempt 1, as the host's key would name the attempt.
	rep, err := node.Replay(ctx, rt, m.Version, at, weft.TapeKey{InstanceID: "replay", Attempt: 1}, *timeout, nil)
	if err != nil {
		fmt.Fprintf(stderr, "weft: replaying: %v\n", err)
		return exitFailed
	}
	r := api.ReplayDocument(rep)
	if *output == "json" {
		out, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "weft: %v\n", err)
			return exitInternal
		}
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		printReplay(stdout, &r)
	}
	if r.Outcome != string(weft.ReplaySame) {
		return exitFailed
	}
	return exitOK
}
