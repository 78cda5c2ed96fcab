// Command temporal drives a Temporal dev server with the shape of Weft's
// seq3 scenario (bench/load): a workflow of three echo activities, each
// taking the last one's output, started and awaited by a closed loop of
// -concurrency clients. It runs the worker that executes the workflow and
// its activities in this process, as a Temporal user does, and reports
// the same figures as bench/load: completed workflows per second, the
// latency's median, p90 and p99, the server's CPU per workflow (from
// /proc/<-server-pid>/stat) and this process's (worker and clients).
//
//	temporal -address 127.0.0.1:7233 -server-pid 1234 -n 500 -concurrency 50 -json results.jsonl
//
// It is its own module so that the Temporal SDK and server stay out of
// Weft's modules; bench/http.sh builds and runs it when STORES includes
// temporal.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// result is bench/load's result document, so that `load -summarize`
// reads both.
type result struct {
	Label       string  `json:"label"`
	Workflow    string  `json:"workflow"`
	Loop        string  `json:"loop"`
	N           int     `json:"n"`
	Completed   int     `json:"completed"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"per_second"`
	P50ms       float64 `json:"p50_ms"`
	P90ms       float64 `json:"p90_ms"`
	P99ms       float64 `json:"p99_ms"`
	HostCPUms   float64 `json:"host_cpu_ms_per_workflow"`
	LoadCPUms   float64 `json:"load_cpu_ms_per_workflow"`
	FirstError  string  `json:"first_error,omitempty"`
	GeneratedAt string  `json:"generated_at"`
}

const taskQueue = "seq3"

func main() {
	address := flag.String("address", "127.0.0.1:7233", "the Temporal frontend's host:port")
	serverPID := flag.Int("server-pid", 0, "the dev server's process id, for its CPU time")
	n := flag.Int("n", 500, "workflows measured")
	warmup := flag.Int("warmup", 50, "workflows run before measuring")
	concurrency := flag.Int("concurrency", 50, "workflows in flight")
	label := flag.String("label", "", "a name for the run in -json output")
	jsonOut := flag.String("json", "", "append the result as one JSON document to this file")
	flag.Parse()
	if err := run(*address, *serverPID, *n, *warmup, *concurrency, *label, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "temporal:", err)
		os.Exit(1)
	}
}

// seq3 is the workflow: three echo activities in a row.
func seq3(ctx workflow.Context, in map[string]any) (map[string]any, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	v := in
	for range 3 {
		var out map[string]any
		if err := workflow.ExecuteActivity(ctx, "echo", v).Get(ctx, &out); err != nil {
			return nil, err
		}
		v = out
	}
	return v, nil
}

// echo is kit.echo's counterpart: it answers its input.
func echo(_ context.Context, in map[string]any) (map[string]any, error) { return in, nil }

func run(address string, serverPID, n, warmup, concurrency int, label, jsonOut string) error {
	quiet := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	c, err := client.Dial(client.Options{HostPort: address, Logger: quiet})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", address, err)
	}
	defer c.Close()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(seq3, workflow.RegisterOptions{Name: "seq3"})
	w.RegisterActivityWithOptions(echo, activity.RegisterOptions{Name: "echo"})
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the worker: %w", err)
	}
	defer w.Stop()

	input := map[string]any{"order": "A-1042", "amount": 4200}
	var seq atomic.Int64
	prefix := strconv.FormatInt(time.Now().UnixNano(), 36)
	one := func(ctx context.Context) error {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("seq3-%s-%d", prefix, seq.Add(1)), TaskQueue: taskQueue,
		}, "seq3", input)
		if err != nil {
			return err
		}
		var out map[string]any
		if err := run.Get(ctx, &out); err != nil {
			return err
		}
		if out["order"] != "A-1042" {
			return fmt.Errorf("workflow %s answered %v", run.GetID(), out)
		}
		return nil
	}
	// outcome is what a loop of count workflows gave.
	type outcome struct {
		lat   []time.Duration
		errs  int
		first error
		took  time.Duration
	}
	loop := func(count int) outcome {
		var o outcome
		var mu sync.Mutex
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range concurrency {
			wg.Go(func() {
				for next.Add(1) <= int64(count) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					t := time.Now()
					err := one(ctx)
					d := time.Since(t)
					cancel()
					mu.Lock()
					if err != nil {
						o.errs++
						if o.first == nil {
							o.first = err
						}
					} else {
						o.lat = append(o.lat, d)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		o.took = time.Since(start)
		return o
	}
	if warmup > 0 {
		if o := loop(warmup); o.errs == warmup {
			return fmt.Errorf("every warm-up workflow failed, the first with: %w", o.first)
		}
	}
	server0, err := procCPU(serverPID)
	if err != nil {
		return err
	}
	self0, err := selfCPU()
	if err != nil {
		return err
	}
	o := loop(n)
	lat, errs, first, took := o.lat, o.errs, o.first, o.took
	server1, err := procCPU(serverPID)
	if err != nil {
		return err
	}
	self1, err := selfCPU()
	if err != nil {
		return err
	}

	slices.Sort(lat)
	done := len(lat)
	r := result{
		Label: label, Workflow: "seq3", Loop: fmt.Sprintf("closed-%d", concurrency), N: n, Completed: done, Errors: errs,
		Seconds: took.Seconds(), GeneratedAt: time.Now().UTC().Format(time.RFC3339),
	}
	if r.Label == "" {
		r.Label = "temporal: seq3, " + strconv.Itoa(concurrency) + " in flight"
	}
	if done > 0 {
		r.PerSecond = float64(done) / took.Seconds()
		r.P50ms, r.P90ms, r.P99ms = ms(quantile(lat, 0.5)), ms(quantile(lat, 0.9)), ms(quantile(lat, 0.99))
		r.HostCPUms = ms(server1-server0) / float64(done)
		r.LoadCPUms = ms(self1-self0) / float64(done)
	}
	if first != nil {
		r.FirstError = first.Error()
	}
	fmt.Printf("%s: %d completed, %d errors in %.2fs: %.0f workflows/s, p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, server CPU %.3f ms/workflow (worker and clients %.3f ms/workflow)\n",
		r.Label, done, errs, r.Seconds, r.PerSecond, r.P50ms, r.P90ms, r.P99ms, r.HostCPUms, r.LoadCPUms)
	if jsonOut != "" {
		f, err := os.OpenFile(jsonOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if err := errors.Join(json.NewEncoder(f).Encode(r), f.Close()); err != nil {
			return fmt.Errorf("writing %s: %w", jsonOut, err)
		}
	}
	if done == 0 {
		return errors.New("no workflow completed")
	}
	return nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// procCPU is process pid's user and system CPU time, from /proc (clock
// ticks of 10 ms).
func procCPU(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the server's CPU time: %w", err)
	}
	// The command name may hold spaces: fields count from its ")".
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("reading the server's CPU time: short /proc/%d/stat", pid)
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("reading the server's CPU time: %w", err)
	}
	return time.Duration(user+sys) * 10 * time.Millisecond, nil
}

// selfCPU is this process's user and system CPU time.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("reading this process's CPU time: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
