// Command dbos drives DBOS Transact for Go on a Postgres with the shape of
// Weft's seq3 scenario (bench/load): a workflow of three steps, each a
// function that answers its input (kit.echo's counterpart), each step's
// result checkpointed in Postgres as DBOS does by default. DBOS is a
// library: the workflows run in this process, started with
// dbos.RunWorkflow and awaited by a closed loop of -concurrency clients,
// as a DBOS user runs them. It reports the same figures as bench/load:
// completed workflows per second, the latency's median, p90 and p99, and
// the CPU per workflow of this process and of Postgres (the postmaster
// -postgres-pid and its children, from /proc) together, as the host CPU.
//
//	dbos -database-url postgres://postgres@127.0.0.1:5432/dbos_bench -postgres-pid 1234 -n 2000 -concurrency 50 -json results.jsonl
//
// It is its own module so that DBOS and pgx stay out of Weft's modules;
// bench/http.sh builds it, starts a Postgres for it and runs it when
// STORES includes dbos.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// result is bench/load's result document, so that `load -summarize`
// reads both. HostCPUms is this process's CPU (DBOS, the workflows and
// the clients that start them: all one process) plus Postgres's; the two
// parts are also given apart. LoadCPUms stays 0: there is no load process
// apart from the one that runs the workflows.
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
	ProcessCPU  float64 `json:"dbos_process_cpu_ms_per_workflow"`
	PostgresCPU float64 `json:"postgres_cpu_ms_per_workflow"`
	LoadCPUms   float64 `json:"load_cpu_ms_per_workflow"`
	PoolConns   int32   `json:"pool_max_conns"`
	FirstError  string  `json:"first_error,omitempty"`
	GeneratedAt string  `json:"generated_at"`
}

// config is what the flags say.
type config struct {
	databaseURL       string
	postgresPID       int
	n, warmup         int
	concurrency, pool int
	label, jsonOut    string
}

func main() {
	var c config
	flag.StringVar(&c.databaseURL, "database-url", "", "the Postgres URL of DBOS's system database (created when missing)")
	flag.IntVar(&c.postgresPID, "postgres-pid", 0, "the postmaster's process id, for its and its children's CPU time")
	flag.IntVar(&c.n, "n", 500, "workflows measured")
	flag.IntVar(&c.warmup, "warmup", 50, "workflows run before measuring")
	flag.IntVar(&c.concurrency, "concurrency", 50, "workflows in flight")
	flag.IntVar(&c.pool, "pool", 0, "the connection pool's size (pool_max_conns); 0 keeps DBOS's default (20)")
	flag.StringVar(&c.label, "label", "", "a name for the run in -json output")
	flag.StringVar(&c.jsonOut, "json", "", "append the result as one JSON document to this file")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "dbos:", err)
		os.Exit(1)
	}
}

// seq3 is the workflow: three echo steps in a row, each taking the last
// one's output.
func seq3(ctx dbos.Context, in map[string]any) (map[string]any, error) {
	v := in
	for range 3 {
		out, err := dbos.RunAsStep(ctx, func(context.Context) (map[string]any, error) { return echo(v) }, dbos.WithStepName("echo"))
		if err != nil {
			return nil, err
		}
		v = out
	}
	return v, nil
}

// echo is kit.echo's counterpart: it answers its input.
func echo(in map[string]any) (map[string]any, error) { return in, nil }

// withPool sets pool_max_conns in a Postgres URL.
func withPool(raw string, conns int) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing -database-url: %w", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(conns))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func run(c config) error {
	if c.databaseURL == "" {
		return errors.New("-database-url is required")
	}
	if c.n <= 0 || c.concurrency <= 0 {
		return fmt.Errorf("-n (%d) and -concurrency (%d) must be positive", c.n, c.concurrency)
	}
	dsn := c.databaseURL
	if c.pool > 0 {
		var err error
		if dsn, err = withPool(dsn, c.pool); err != nil {
			return err
		}
	}
	// Warnings and errors go to stderr until the shutdown, whose cancelled
	// queue poll (DBOS's internal queue, polled every second) DBOS logs
	// as an error.
	var level slog.LevelVar
	level.Set(slog.LevelWarn)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: &level}))
	setup, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx, err := dbos.NewContext(setup, dbos.Config{AppName: "weft-bench", DatabaseURL: dsn, Logger: logger})
	if err != nil {
		return fmt.Errorf("connecting DBOS to its system database: %w", err)
	}
	dbos.RegisterWorkflow(ctx, seq3, dbos.WithWorkflowName("seq3"))
	if err := dbos.Launch(ctx); err != nil {
		return fmt.Errorf("launching DBOS: %w", err)
	}
	defer func() {
		level.Set(slog.LevelError + 4)
		if err := dbos.Shutdown(ctx, 10*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "dbos: shutting down:", err)
		}
	}()

	input := map[string]any{"order": "A-1042", "amount": 4200}
	one := func() error {
		h, err := dbos.RunWorkflow(ctx, seq3, input)
		if err != nil {
			return fmt.Errorf("starting seq3: %w", err)
		}
		out, err := h.GetResult(dbos.WithHandleTimeout(time.Minute))
		if err != nil {
			return fmt.Errorf("workflow %s: %w", h.GetWorkflowID(), err)
		}
		if out["order"] != "A-1042" {
			return fmt.Errorf("workflow %s answered %v", h.GetWorkflowID(), out)
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
		for range c.concurrency {
			wg.Go(func() {
				for next.Add(1) <= int64(count) {
					t := time.Now()
					err := one()
					d := time.Since(t)
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
	if c.warmup > 0 {
		if o := loop(c.warmup); o.errs == c.warmup {
			return fmt.Errorf("every warm-up workflow failed, the first with: %w", o.first)
		}
	}
	pg0, err := groupCPU(c.postgresPID)
	if err != nil {
		return err
	}
	self0, err := selfCPU()
	if err != nil {
		return err
	}
	o := loop(c.n)
	pg1, err := groupCPU(c.postgresPID)
	if err != nil {
		return err
	}
	self1, err := selfCPU()
	if err != nil {
		return err
	}

	slices.Sort(o.lat)
	done := len(o.lat)
	r := result{
		Label: c.label, Workflow: "seq3", Loop: fmt.Sprintf("closed-%d", c.concurrency), N: c.n, Completed: done, Errors: o.errs,
		Seconds: o.took.Seconds(), PoolConns: poolConns(dsn), GeneratedAt: time.Now().UTC().Format(time.RFC3339),
	}
	if r.Label == "" {
		r.Label = "dbos: seq3, " + strconv.Itoa(c.concurrency) + " in flight"
	}
	if done > 0 {
		r.PerSecond = float64(done) / o.took.Seconds()
		r.P50ms, r.P90ms, r.P99ms = ms(quantile(o.lat, 0.5)), ms(quantile(o.lat, 0.9)), ms(quantile(o.lat, 0.99))
		r.ProcessCPU = ms(self1-self0) / float64(done)
		r.PostgresCPU = ms(pg1-pg0) / float64(done)
		r.HostCPUms = r.ProcessCPU + r.PostgresCPU
	}
	if o.first != nil {
		r.FirstError = o.first.Error()
	}
	fmt.Printf("%s: %d completed, %d errors in %.2fs: %.0f workflows/s, p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, CPU %.3f ms/workflow (DBOS process %.3f, Postgres %.3f; pool %d)\n",
		r.Label, done, o.errs, r.Seconds, r.PerSecond, r.P50ms, r.P90ms, r.P99ms, r.HostCPUms, r.ProcessCPU, r.PostgresCPU, r.PoolConns)
	if c.jsonOut != "" {
		f, err := os.OpenFile(c.jsonOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if err := errors.Join(json.NewEncoder(f).Encode(r), f.Close()); err != nil {
			return fmt.Errorf("writing %s: %w", c.jsonOut, err)
		}
	}
	if done == 0 {
		return fmt.Errorf("no workflow completed; the first error: %w", o.first)
	}
	return nil
}

// poolConns is the pool size the URL asks for, or DBOS's default.
func poolConns(dsn string) int32 {
	if u, err := url.Parse(dsn); err == nil {
		if v, err := strconv.Atoi(u.Query().Get("pool_max_conns")); err == nil {
			return int32(v)
		}
	}
	return 20
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// tick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on Linux).
const tick = 10 * time.Millisecond

// statFields are the fields of /proc/<pid>/stat after the command name,
// which may hold spaces: field 3 (state) is statFields[0].
func statFields(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return f, nil
}

// ticks sums the fields at the given indexes of statFields.
func ticks(f []string, idx ...int) (int64, error) {
	var sum int64
	for _, i := range idx {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// groupCPU is the CPU time of process pid (the postmaster), of the
// children it has reaped (cutime, cstime) and of its live children (the
// backends, the checkpointer, the WAL writer...): a child that exits
// between two readings moves from the last sum to the reaped one, so the
// difference of two readings is the CPU the whole server used between
// them.
func groupCPU(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	f, err := statFields(pid)
	if err != nil {
		return 0, fmt.Errorf("reading Postgres's CPU time (postmaster %d): %w", pid, err)
	}
	// utime, stime, cutime, cstime are fields 14–17: 11–14 here.
	sum, err := ticks(f, 11, 12, 13, 14)
	if err != nil {
		return 0, fmt.Errorf("reading Postgres's CPU time (postmaster %d): %w", pid, err)
	}
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	want := strconv.Itoa(pid)
	for _, p := range procs {
		child, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || child == pid {
			continue
		}
		cf, err := statFields(child)
		if err != nil || cf[1] != want { // field 4, the parent's pid
			continue // gone since the listing, or not a child
		}
		t, err := ticks(cf, 11, 12)
		if err != nil {
			return 0, fmt.Errorf("reading Postgres's CPU time (backend %d): %w", child, err)
		}
		sum += t
	}
	return time.Duration(sum) * tick, nil
}

// selfCPU is this process's user and system CPU time.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("reading this process's CPU time: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
