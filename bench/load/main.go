// Command load drives a running Weft host over HTTP, from its own process,
// as users do: it starts workflow instances with
// POST /v1/workflows/{name}/instances?wait=…, which answers when the
// instance has finished, and reports completed workflows per second, the
// latency's median, p90 and p99, and the host's CPU time per workflow
// (from the host's process_cpu_seconds_total, and redis-server's
// used_cpu_user + used_cpu_sys, and its commands per workflow, when
// -redis is given).
//
// Two loops:
//
//   - closed (-concurrency N, the default): N clients, each starting the
//     next workflow when its last one answered;
//   - open (-rate R): a workflow starts every 1/R seconds, whatever the
//     answers, and each latency counts from when its start was due, not
//     from when it was sent, as wrk2 does, so that a stalled host is not
//     flattered by the requests it kept from being sent (coordinated
//     omission).
//
// With -setup it first uploads the kit plugin and saves the workflows of
// the scenarios (seq3: three kit.echo steps; sleep3: three kit.sleep steps
// of -sleep each). A warm-up of -warmup workflows precedes the measured
// -n. It prints one line for people and, with -json, appends one JSON
// document per run to a file, which -summarize reads back to print the
// medians of several runs per scenario.
//
//	load -server http://127.0.0.1:8080 -setup -plugin bin/plugins/kit.wasm -workflow seq3 -n 2000 -concurrency 50
//	load -summarize results.jsonl
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// workflows are the scenarios' definitions that -setup saves.
var workflows = map[string]string{
	"seq3": `name: seq3
steps:
  - { id: a, activity: kit.echo, input: "${ input }", output: a }
  - { id: b, activity: kit.echo, input: "${ vars.a }", output: b }
  - { id: c, activity: kit.echo, input: "${ vars.b }", output: c }
output: "${ vars.c }"
`,
	"sleep3": `name: sleep3
steps:
  - { id: a, activity: kit.sleep, input: "${ input }" }
  - { id: b, activity: kit.sleep, input: "${ input }" }
  - { id: c, activity: kit.sleep, input: "${ input }" }
output: done
`,
}

// config is what the flags say.
type config struct {
	server, token, workflow, plugin, label string
	redis                                  string
	n, warmup, concurrency                 int
	rate                                   float64
	wait                                   time.Duration
	sleep                                  time.Duration
	setup                                  bool
	json                                   string
}

// result is one run, as -json writes it.
type result struct {
	Label      string  `json:"label"`
	Workflow   string  `json:"workflow"`
	Loop       string  `json:"loop"` // closed-N or open-R/s
	N          int     `json:"n"`
	Completed  int     `json:"completed"`
	Errors     int     `json:"errors"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"per_second"`
	P50ms      float64 `json:"p50_ms"`
	P90ms      float64 `json:"p90_ms"`
	P99ms      float64 `json:"p99_ms"`
	HostCPUms  float64 `json:"host_cpu_ms_per_workflow"`            // -1 when the host does not export it
	RedisCPUms float64 `json:"redis_cpu_ms_per_workflow,omitempty"` // with -redis
	// RedisCommands is redis-server's commands per completed workflow
	// and RedisCalls the same by command (INFO commandstats); with -redis.
	RedisCommands float64            `json:"redis_commands_per_workflow,omitempty"`
	RedisCalls    map[string]float64 `json:"redis_calls_per_workflow,omitempty"`
	// RedisCPUByServer is RedisCPUms for each address of -redis, in
	// order, when there are several (the masters of a Redis Cluster);
	// RedisBusiestShare is the largest of them over their sum.
	RedisCPUByServer  []float64 `json:"redis_cpu_ms_per_workflow_by_server,omitempty"`
	RedisBusiestShare float64   `json:"redis_busiest_share,omitempty"`
	LoadCPUms         float64   `json:"load_cpu_ms_per_workflow"` // this process
	FirstError        string    `json:"first_error,omitempty"`
	GeneratedAt       string    `json:"generated_at"`
}

func main() {
	var c config
	var summarize string
	flag.StringVar(&c.server, "server", "http://127.0.0.1:8080", "the host's base URL")
	flag.StringVar(&c.token, "token", os.Getenv("WEFT_TOKEN"), "bearer token (default $WEFT_TOKEN)")
	flag.StringVar(&c.workflow, "workflow", "seq3", "the workflow to start: seq3 or sleep3 with -setup, or any saved one")
	flag.StringVar(&c.plugin, "plugin", "bin/plugins/kit.wasm", "the kit plugin that -setup uploads")
	flag.StringVar(&c.label, "label", "", "a name for the run in -json output (default: workflow and loop)")
	flag.StringVar(&c.redis, "redis", "", "redis-server addresses whose CPU time and commands to count, comma-separated (the masters of a Redis Cluster: summed, and each one's CPU reported)")
	flag.IntVar(&c.n, "n", 2000, "workflows measured")
	flag.IntVar(&c.warmup, "warmup", 200, "workflows run before measuring")
	flag.IntVar(&c.concurrency, "concurrency", 50, "closed loop: workflows in flight")
	flag.Float64Var(&c.rate, "rate", 0, "open loop: workflows started per second (0: closed loop)")
	flag.DurationVar(&c.wait, "wait", 30*time.Second, "the ?wait= of each start")
	flag.DurationVar(&c.sleep, "sleep", 100*time.Millisecond, "sleep3: how long each activity sleeps")
	flag.BoolVar(&c.setup, "setup", false, "upload the kit plugin and save the scenario workflows first")
	flag.StringVar(&c.json, "json", "", "append the run's result as one JSON line to this file")
	flag.StringVar(&summarize, "summarize", "", "print the medians of the runs in this -json file, per label, and exit")
	flag.Parse()
	if summarize != "" {
		if err := summarizeFile(summarize, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	if c.n < 1 || c.concurrency < 1 || c.rate < 0 || c.warmup < 0 {
		return errors.New("-n and -concurrency must be positive, -rate and -warmup not negative")
	}
	cl := &client{base: strings.TrimRight(c.server, "/"), token: c.token, http: &http.Client{
		Timeout:   c.wait + 30*time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 10000, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute},
	}}
	if c.setup {
		if err := setup(ctx, cl, c.plugin); err != nil {
			return err
		}
	}
	input := json.RawMessage(`{"order":"A-1042","amount":4200}`)
	if c.workflow == "sleep3" {
		input = json.RawMessage(fmt.Sprintf(`{"ms":%d}`, c.sleep.Milliseconds()))
	}
	start := func(ctx context.Context) error { return cl.start(ctx, c.workflow, input, c.wait) }

	if c.warmup > 0 {
		if _, err := closedLoop(ctx, start, c.warmup, min(c.concurrency, c.warmup)); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	hostBefore, hostErr := cl.processCPU(ctx)
	redisBefore, err := readRedis(ctx, c.redis)
	if err != nil {
		return err
	}
	selfBefore := selfCPU()
	t0 := time.Now()
	var runs []sample
	loop := fmt.Sprintf("closed-%d", c.concurrency)
	if c.rate > 0 {
		loop = fmt.Sprintf("open-%g/s", c.rate)
		runs = openLoop(ctx, start, c.n, c.rate)
	} else {
		runs, err = closedLoop(ctx, start, c.n, c.concurrency)
		if err != nil {
			return err
		}
	}
	elapsed := time.Since(t0)
	selfAfter := selfCPU()
	hostAfter, hostErr2 := cl.processCPU(ctx)
	redisAfter, err := readRedis(ctx, c.redis)
	if err != nil {
		return err
	}

	r := result{Label: c.label, Workflow: c.workflow, Loop: loop, N: c.n, Seconds: elapsed.Seconds(), GeneratedAt: time.Now().UTC().Format(time.RFC3339)}
	if r.Label == "" {
		r.Label = c.workflow + " " + loop
	}
	var lat []time.Duration
	for _, s := range runs {
		if s.err != nil {
			if r.Errors == 0 {
				r.FirstError = s.err.Error()
			}
			r.Errors++
			continue
		}
		lat = append(lat, s.latency)
	}
	r.Completed = len(lat)
	slices.Sort(lat)
	r.PerSecond = float64(r.Completed) / elapsed.Seconds()
	r.P50ms, r.P90ms, r.P99ms = ms(quantile(lat, 0.5)), ms(quantile(lat, 0.9)), ms(quantile(lat, 0.99))
	per := func(d time.Duration) float64 {
		if r.Completed == 0 {
			return 0
		}
		return ms(d) / float64(r.Completed)
	}
	r.HostCPUms = -1
	if hostErr == nil && hostErr2 == nil {
		r.HostCPUms = per(hostAfter - hostBefore)
	}
	if c.redis != "" && r.Completed > 0 {
		r.RedisCPUms = per(redisAfter.cpu - redisBefore.cpu)
		if len(redisAfter.byServer) > 1 {
			for i, cpu := range redisAfter.byServer {
				r.RedisCPUByServer = append(r.RedisCPUByServer, per(cpu-redisBefore.byServer[i]))
			}
			r.RedisBusiestShare = slices.Max(r.RedisCPUByServer) / r.RedisCPUms
		}
		// The commands of the measured run, a few INFO calls aside.
		r.RedisCommands = float64(redisAfter.commands-redisBefore.commands) / float64(r.Completed)
		r.RedisCalls = map[string]float64{}
		for name, n := range redisAfter.calls {
			if d := n - redisBefore.calls[name]; d > 0 {
				r.RedisCalls[name] = float64(d) / float64(r.Completed)
			}
		}
	}
	r.LoadCPUms = per(selfAfter - selfBefore)

	fmt.Printf("%s: %d completed, %d errors in %.2fs: %.0f workflows/s, p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, host CPU %.3f ms/workflow",
		r.Label, r.Completed, r.Errors, r.Seconds, r.PerSecond, r.P50ms, r.P90ms, r.P99ms, r.HostCPUms)
	if c.redis != "" {
		fmt.Printf(", redis CPU %.3f ms/workflow, %.1f redis commands/workflow", r.RedisCPUms, r.RedisCommands)
		if len(r.RedisCPUByServer) > 1 {
			fmt.Printf(" (by server %.3f ms, the busiest %.2f of the sum)", r.RedisCPUByServer, r.RedisBusiestShare)
		}
	}
	fmt.Printf(" (load generator %.3f ms/workflow)\n", r.LoadCPUms)
	if r.FirstError != "" {
		fmt.Printf("  first error: %s\n", r.FirstError)
	}
	if c.json != "" {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(c.json, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, werr := f.Write(append(b, '\n'))
		if err := errors.Join(werr, f.Close()); err != nil {
			return fmt.Errorf("writing %s: %w", c.json, err)
		}
	}
	if r.Completed == 0 {
		return fmt.Errorf("no workflow completed: %s", r.FirstError)
	}
	return nil
}

// sample is one workflow's outcome.
type sample struct {
	latency time.Duration
	err     error
}

// closedLoop runs n starts with at most inFlight at once. It fails only
// when ctx ends.
func closedLoop(ctx context.Context, start func(context.Context) error, n, inFlight int) ([]sample, error) {
	out := make([]sample, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t := time.Now()
				err := start(ctx)
				out[i] = sample{latency: time.Since(t), err: err}
			}
		}()
	}
	wg.Wait()
	return out, ctx.Err()
}

// openLoop starts n workflows at rate per second, each on its own
// goroutine, and measures each from when it was due.
func openLoop(ctx context.Context, start func(context.Context) error, n int, rate float64) []sample {
	out := make([]sample, n)
	interval := time.Duration(float64(time.Second) / rate)
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		due := t0.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing the arrivals, not waiting for an outcome
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := start(ctx)
			out[i] = sample{latency: time.Since(due), err: err}
		}()
	}
	wg.Wait()
	return out
}

// client is the few API calls the generator makes.
type client struct {
	base, token string
	http        *http.Client
}

func (c *client) do(ctx context.Context, method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// start starts one instance and waits for it; an instance that has not
// completed when the answer comes is an error.
func (c *client) start(ctx context.Context, workflow string, input json.RawMessage, wait time.Duration) error {
	body, err := json.Marshal(map[string]any{"input": input})
	if err != nil {
		return err
	}
	status, b, err := c.do(ctx, "POST", "/v1/workflows/"+workflow+"/instances?wait="+wait.String(), "application/json", body)
	if err != nil {
		return err
	}
	if status != http.StatusCreated {
		return fmt.Errorf("start %s: status %d: %s", workflow, status, bytes.TrimSpace(b))
	}
	var inst struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &inst); err != nil {
		return fmt.Errorf("start %s: %w", workflow, err)
	}
	if inst.Status != "completed" {
		return fmt.Errorf("instance %s is %s after ?wait=%s", inst.ID, inst.Status, wait)
	}
	return nil
}

func setup(ctx context.Context, c *client, plugin string) error {
	wasm, err := os.ReadFile(plugin)
	if err != nil {
		return fmt.Errorf("setup: %w (make plugins builds it)", err)
	}
	if status, b, err := c.do(ctx, "PUT", "/v1/plugins/kit", "application/wasm", wasm); err != nil || status >= 300 {
		return fmt.Errorf("setup: uploading %s: %d %s %v", plugin, status, bytes.TrimSpace(b), err)
	}
	names := make([]string, 0, len(workflows))
	for name := range workflows {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if status, b, err := c.do(ctx, "PUT", "/v1/workflows/"+name, "application/yaml", []byte(workflows[name])); err != nil || status >= 300 {
			return fmt.Errorf("setup: saving workflow %s: %d %s %v", name, status, bytes.TrimSpace(b), err)
		}
	}
	return nil
}

// processCPU reads the host's process_cpu_seconds_total from /metrics.
func (c *client) processCPU(ctx context.Context) (time.Duration, error) {
	status, b, err := c.do(ctx, "GET", "/metrics", "", nil)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: status %d", status)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, err
			}
			return time.Duration(f * float64(time.Second)), nil
		}
	}
	return 0, errors.New("the host exports no process_cpu_seconds_total")
}

// redisStats is what redis-server says it has done so far, summed over
// the servers of -redis.
type redisStats struct {
	cpu      time.Duration // used_cpu_user + used_cpu_sys
	commands int64         // total_commands_processed
	// calls counts the calls of each command (INFO commandstats), by name.
	calls map[string]int64
	// byServer is each server's cpu, in the order of -redis.
	byServer []time.Duration
}

// readRedis reads the CPU time and command counts of each redis-server
// of a comma-separated address list with INFO and sums them; the zero
// value without an address.
func readRedis(ctx context.Context, addrs string) (redisStats, error) {
	st := redisStats{calls: map[string]int64{}}
	if addrs == "" {
		return st, nil
	}
	for addr := range strings.SplitSeq(addrs, ",") {
		one, err := readOneRedis(ctx, strings.TrimSpace(addr))
		if err != nil {
			return st, err
		}
		st.cpu += one.cpu
		st.commands += one.commands
		for name, n := range one.calls {
			st.calls[name] += n
		}
		st.byServer = append(st.byServer, one.cpu)
	}
	return st, nil
}

// readOneRedis reads one redis-server's CPU time and command counts.
func readOneRedis(ctx context.Context, addr string) (redisStats, error) {
	st := redisStats{calls: map[string]int64{}}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "cpu", "stats", "commandstats").Result()
	if err != nil {
		return st, fmt.Errorf("redis %s: INFO: %w", addr, err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return st, fmt.Errorf("redis %s: %s: %w", addr, line, err)
			}
			st.cpu += time.Duration(f * float64(time.Second))
		case k == "total_commands_processed":
			if st.commands, err = strconv.ParseInt(v, 10, 64); err != nil {
				return st, fmt.Errorf("redis %s: %s: %w", addr, line, err)
			}
		case strings.HasPrefix(k, "cmdstat_"):
			// cmdstat_evalsha:calls=12,usec=…
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				return st, fmt.Errorf("redis %s: %s: %w", addr, line, err)
			}
			st.calls[strings.TrimPrefix(k, "cmdstat_")] = n
		}
	}
	return st, nil
}

// selfCPU is this process's CPU time, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summarizeFile prints, per label in order of first appearance, the median
// of each figure over the runs in a -json file, with the range.
func summarizeFile(path string, w io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	byLabel := map[string][]result{}
	var order []string
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r result
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		if _, ok := byLabel[r.Label]; !ok {
			order = append(order, r.Label)
		}
		byLabel[r.Label] = append(byLabel[r.Label], r)
	}
	fmt.Fprintln(w, "| scenario | runs | workflows/s | p50 ms | p90 ms | p99 ms | host CPU ms/wf | redis CPU ms/wf | busiest redis's share | redis commands/wf | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, label := range order {
		rs := byLabel[label]
		col := func(f func(result) float64, prec int) string {
			vs := make([]float64, len(rs))
			for i, r := range rs {
				vs[i] = f(r)
			}
			slices.Sort(vs)
			med := vs[len(vs)/2]
			if len(vs)%2 == 0 {
				med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
			}
			if len(vs) == 1 {
				return strconv.FormatFloat(med, 'f', prec, 64)
			}
			return fmt.Sprintf("%s (%s–%s)", strconv.FormatFloat(med, 'f', prec, 64),
				strconv.FormatFloat(vs[0], 'f', prec, 64), strconv.FormatFloat(vs[len(vs)-1], 'f', prec, 64))
		}
		errs := 0
		for _, r := range rs {
			errs += r.Errors
		}
		redis, share, commands := "–", "–", "–"
		if rs[0].RedisCPUms > 0 {
			redis = col(func(r result) float64 { return r.RedisCPUms }, 3)
			commands = col(func(r result) float64 { return r.RedisCommands }, 1)
		}
		if rs[0].RedisBusiestShare > 0 {
			share = col(func(r result) float64 { return r.RedisBusiestShare }, 2)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", label, len(rs),
			col(func(r result) float64 { return r.PerSecond }, 0),
			col(func(r result) float64 { return r.P50ms }, 1),
			col(func(r result) float64 { return r.P90ms }, 1),
			col(func(r result) float64 { return r.P99ms }, 1),
			col(func(r result) float64 { return r.HostCPUms }, 3),
			redis, share, commands, errs)
	}
	return nil
}
