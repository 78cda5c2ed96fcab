//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/procstat"
)

// The soak (docs/reliability.md): the chaos rig without faults, at a
// steady rate of starts for a long time, sampling each node's resident
// memory, goroutines and open files and the store's size. It fails when
// any of them is still growing in the last third of the run: the median
// of the last third against the median of the second. Only `make soak`
// runs it (-soak.duration); the store stays flat only with the retention
// of finished instances (engine.retention), which the nodes get.
var (
	soakDuration  = flag.Duration("soak.duration", 0, "soak: how long to run (0: skip the soak)")
	soakRate      = flag.Float64("soak.rate", 5, "soak: instance starts per second")
	soakRetention = flag.Duration("soak.retention", time.Minute, "soak: engine.retention, how long finished instances are kept (0: not set, every instance is kept)")
	soakEvery     = flag.Duration("soak.every", 0, "soak: time between samples (0: a sixtieth of the duration, at least 5s)")
	soakGrowth    = flag.Float64("soak.growth", 0.25, "soak: the largest growth allowed from the second third's median to the last third's")
)

// soakSample is one sample of the run.
type soakSample struct {
	At        time.Time
	Nodes     []nodeSample
	RedisMem  float64 // used_memory, bytes
	RedisKeys float64 // DBSIZE
	AOF       float64 // aof_current_size, bytes
	// Windowed are the keys the host keeps for a fixed time whatever
	// the retention (24h): the records of delivered events, which make
	// a repeated send idempotent, and the instance locks' fence counters.
	// Over a soak shorter than a day they grow with the instances run;
	// WindowedMem estimates their memory (their count times the mean
	// MEMORY USAGE of a sample of them).
	Events, Fences float64
	WindowedMem    float64
	Started        int64
}

type nodeSample struct {
	RSS, Goroutines, OpenFiles float64
}

func TestSoak(t *testing.T) {
	if *soakDuration <= 0 {
		t.Skip("the soak runs with -soak.duration (make soak)")
	}
	bin := clusterBinary(t)
	every := *soakEvery
	if every <= 0 {
		every = max(5*time.Second, *soakDuration/60)
	}
	// A build without retention refuses the setting; say so rather than
	// let the store's growth fail the soak.
	// -soak.retention=0 keeps every finished instance: the store grows,
	// and the soak says so.
	var retention []string
	if *soakRetention > 0 {
		retention = []string{"--set", "engine.retention=" + soakRetention.String()}
		if out, err := exec.Command(bin, append([]string{"config"}, retention...)...).CombinedOutput(); err != nil {
			t.Fatalf("this build has no engine.retention, which a soak needs for a store that stays flat (merge the branch that adds it, or run with -soak.retention=0 to see the store grow): %v\n%s", err, out)
		}
	}
	seed := uint64(time.Now().UnixNano())
	dir := runDir(t, "soak", seed)
	cfg := defaultChaosConfig()
	cfg.Rate = *soakRate
	cfg.Instances = int(soakDuration.Seconds() * cfg.Rate)
	cfg.WorkMS = [2]int64{200, 1000}
	t.Logf("soak: %s at %.1f starts/s (%d instances), retention %s, a sample every %s; report in %s",
		*soakDuration, cfg.Rate, cfg.Instances, *soakRetention, every, dir)

	r := startRig(t, bin, 3, dir, append(retention,
		"--set", "engine.lock_ttl="+cfg.LockTTL.String(),
		"--set", "engine.recovery_interval="+cfg.Recovery.String(),
		"--set", "heartbeat.tick="+cfg.Tick.String(),
		"--set", "heartbeat.cycle="+cfg.Cycle.String(),
		"--set", fmt.Sprint("engine.workers=", cfg.Workers),
		"--set", fmt.Sprint("plugins.pool_size=", cfg.Pool))...)
	deployTo(t, r, chaosWorkflow(cfg))

	plan := makePlan(cfg, seed)
	outs := make([]outcome, len(plan))
	stats := &callStats{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	t0 := time.Now()
	driven := make(chan struct{})
	var started atomic.Int64
	go func() {
		defer close(driven)
		drive(ctx, r, cfg, seed, plan, outs, stats, &started)
	}()
	rdb := r.srv.Client(t)
	var samples []soakSample
	tick := time.NewTicker(every)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-driven:
			done = true
		case <-tick.C:
		}
		s := soakSample{At: time.Now()}
		for _, n := range r.nodes {
			ns, err := sampleNode(ctx, r.hc, n)
			if err != nil {
				t.Fatalf("sampling %s: %v", n.id, err)
			}
			s.Nodes = append(s.Nodes, ns)
		}
		info, err := rdb.Info(ctx, "memory", "persistence").Result()
		if err != nil {
			t.Fatalf("INFO: %v", err)
		}
		s.RedisMem, s.AOF = infoField(info, "used_memory"), infoField(info, "aof_current_size")
		keys, err := rdb.DBSize(ctx).Result()
		if err != nil {
			t.Fatalf("DBSIZE: %v", err)
		}
		s.RedisKeys = float64(keys)
		if s.Events, s.Fences, s.WindowedMem, err = windowedKeys(ctx, rdb); err != nil {
			t.Fatalf("counting the windowed keys: %v", err)
		}
		// Read last: the instances started while the sample was taken
		// have their fence counters counted too.
		s.Started = started.Load()
		samples = append(samples, s)
	}
	elapsed := time.Since(t0)

	// Every instance completed with the right output, as its driver saw
	// it end (retention deletes it afterwards).
	wrong := &verdict{name: "every instance completes with the right output"}
	for i, p := range plan {
		o := outs[i]
		var out chaosOutput
		ok := o.Err == nil && o.Final != nil && o.Final.Status == "completed" && json.Unmarshal(o.Final.Output, &out) == nil &&
			out.Key == p.ID && out.Text == strings.ToUpper(p.ID+":"+p.Word) && out.Work.DoneMS == p.MS
		var got any = o.Err
		if o.Final != nil {
			got = fmt.Sprintf("%s %s", o.Final.Status, o.Final.Output)
		}
		wrong.check(ok, "%s: %v", p.ID, got)
	}
	growth := soakGrowthVerdicts(samples, *soakGrowth)
	// The windowed keys are bounded by their window, not by the run:
	// one event record and one fence counter per instance at most.
	windows := &verdict{name: "the 24h windows hold at most one event record and one fence counter per instance"}
	for _, s := range samples {
		windows.check(s.Events <= float64(s.Started) && s.Fences <= float64(s.Started),
			"at %s: %.0f event records and %.0f fence counters for %d instances", s.At.Format("15:04:05"), s.Events, s.Fences, s.Started)
	}
	growth = append(growth, windows)
	path := filepath.Join(dir, "report.md")
	report := soakReport(samples, growth, wrong, elapsed, cfg, *soakRetention, every)
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Errorf("writing the report: %v", err)
	}
	verdict := "PASS"
	var grew []string
	for _, g := range growth {
		if g.failed > 0 {
			verdict = "FAIL"
			grew = append(grew, g.name)
		}
	}
	if wrong.failed > 0 {
		verdict = "FAIL"
	}
	last := samples[len(samples)-1]
	summary := fmt.Sprintf("soak %s: %s at %.1f/s, %d instances, %d wrong or unfinished; failing checks: %s; last sample: RSS %s, goroutines %s, open files %s, Redis %.1f MiB / %.0f keys (%.1f MiB / %.0f keys outside the 24h windows); report %s",
		verdict, elapsed.Round(time.Second), cfg.Rate, len(plan), wrong.failed, orNone(grew),
		joinNodes(last, func(n nodeSample) string { return fmt.Sprintf("%.0f MiB", n.RSS/(1<<20)) }),
		joinNodes(last, func(n nodeSample) string { return fmt.Sprint(n.Goroutines) }),
		joinNodes(last, func(n nodeSample) string { return fmt.Sprint(n.OpenFiles) }),
		last.RedisMem/(1<<20), last.RedisKeys, (last.RedisMem-last.WindowedMem)/(1<<20), last.RedisKeys-last.Events-last.Fences, path)
	t.Log(summary)
	fmt.Println(summary)
	if wrong.failed > 0 {
		t.Errorf("%s: %d of %d violate it, e.g.\n  %s", wrong.name, wrong.failed, wrong.checked, strings.Join(wrong.examples, "\n  "))
	}
	for _, g := range growth {
		if g.failed > 0 {
			t.Errorf("%s: %s", g.name, strings.Join(g.examples, "; "))
		}
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

func joinNodes(s soakSample, f func(nodeSample) string) string {
	var parts []string
	for _, n := range s.Nodes {
		parts = append(parts, f(n))
	}
	return strings.Join(parts, "/")
}

// sampleNode reads a node's resident memory from /proc and its goroutines
// and open files from its /metrics (the Go and process collectors).
func sampleNode(ctx context.Context, hc *http.Client, n *rigNode) (nodeSample, error) {
	n.mu.Lock()
	cmd, addr := n.cmd, n.addr
	n.mu.Unlock()
	if cmd == nil {
		return nodeSample{}, fmt.Errorf("node %s is not running", n.id)
	}
	rss, err := procstat.RSS(cmd.Process.Pid)
	if err != nil {
		return nodeSample{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := scrapeMetrics(ctx, hc, addr)
	if err != nil {
		return nodeSample{}, err
	}
	g, okG := m["go_goroutines"]
	f, okF := m["process_open_fds"]
	if !okG || !okF {
		return nodeSample{}, fmt.Errorf("node %s: /metrics has no go_goroutines or process_open_fds", n.id)
	}
	return nodeSample{RSS: float64(rss), Goroutines: g, OpenFiles: f}, nil
}

// scrapeMetrics returns the samples without labels of a node's /metrics.
func scrapeMetrics(ctx context.Context, hc *http.Client, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET http://%s/metrics: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || name == "" || name[0] == '#' || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// windowedKeys counts the delivered events' records and the instance
// locks' fence counters (SCAN, which the host never uses but a test may) and estimates
// their memory from a sample of each.
func windowedKeys(ctx context.Context, rdb *redis.Client) (events, fences, mem float64, err error) {
	const sample = 50
	var evSample, fenceSample []string
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		switch {
		case strings.HasPrefix(k, "{weft:}s:"):
			events++
			if len(evSample) < sample {
				evSample = append(evSample, k)
			}
		// The instance locks' counters; the singleton sweeps' few are
		// ordinary keys, checked for growth with the rest.
		case strings.HasPrefix(k, "weft:lock:{"+engine.InstanceLockKey("")) && strings.HasSuffix(k, ":fence"):
			fences++
			if len(fenceSample) < sample {
				fenceSample = append(fenceSample, k)
			}
		}
	}
	if err := iter.Err(); err != nil {
		return 0, 0, 0, err
	}
	for _, f := range []struct {
		keys []string
		n    float64
	}{{evSample, events}, {fenceSample, fences}} {
		if len(f.keys) == 0 {
			continue
		}
		var sum int64
		for _, k := range f.keys {
			u, err := rdb.MemoryUsage(ctx, k).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return 0, 0, 0, err
			}
			sum += u
		}
		mem += f.n * float64(sum) / float64(len(f.keys))
	}
	// The index of when each settled event is forgotten (a sorted set,
	// one member per record) grows and shrinks with the records: measured
	// as one key outside the windows, it rose by about 140 bytes per
	// instance through the first full run.
	u, err := rdb.MemoryUsage(ctx, "{weft:}sf").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, 0, err
	}
	mem += float64(u)
	return events, fences, mem, nil
}

// infoField returns a numeric field of Redis's INFO answer.
func infoField(info, name string) float64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// soakSeries names every series the soak checks and how to read it from
// a sample, with the slack allowed on top of the relative growth (a
// goroutine count that goes from 40 to 52 is noise, not a leak).
type soakSeries struct {
	name  string
	get   func(soakSample) float64
	slack float64
}

func soakAllSeries(nodes int) []soakSeries {
	var all []soakSeries
	for i := range nodes {
		all = append(all,
			soakSeries{fmt.Sprintf("node%d RSS", i+1), func(s soakSample) float64 { return s.Nodes[i].RSS }, 16 << 20},
			soakSeries{fmt.Sprintf("node%d goroutines", i+1), func(s soakSample) float64 { return s.Nodes[i].Goroutines }, 20},
			soakSeries{fmt.Sprintf("node%d open files", i+1), func(s soakSample) float64 { return s.Nodes[i].OpenFiles }, 10},
		)
	}
	return append(all,
		soakSeries{"Redis memory outside the 24h windows", func(s soakSample) float64 { return s.RedisMem - s.WindowedMem }, 4 << 20},
		soakSeries{"Redis keys outside the 24h windows", func(s soakSample) float64 { return s.RedisKeys - s.Events - s.Fences }, 200},
	)
}

// soakGrowthVerdicts compares, for every series, the median of the last
// third of the samples with the median of the second third: a series
// that still grows at the end of the run grows without bound, as far as
// a run can tell. The first third is warm-up (caches, pools, the
// retention's first turn).
func soakGrowthVerdicts(samples []soakSample, growth float64) []*verdict {
	var out []*verdict
	if len(samples) < 6 {
		v := &verdict{name: "enough samples"}
		v.check(false, "%d samples; a soak needs at least 6", len(samples))
		return []*verdict{v}
	}
	third := len(samples) / 3
	for _, s := range soakAllSeries(len(samples[0].Nodes)) {
		mid, last := medianOf(samples[third:2*third], s.get), medianOf(samples[2*third:], s.get)
		v := &verdict{name: s.name}
		v.check(last <= mid*(1+growth)+s.slack, "median %.0f in the second third, %.0f in the last (allowed: %.0f)", mid, last, mid*(1+growth)+s.slack)
		out = append(out, v)
	}
	return out
}

func medianOf(samples []soakSample, get func(soakSample) float64) float64 {
	vs := make([]float64, len(samples))
	for i, s := range samples {
		vs[i] = get(s)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// soakReport is the run's figures, in Markdown: the samples as a table and
// each series' medians by third.
func soakReport(samples []soakSample, growth []*verdict, wrong *verdict, elapsed time.Duration, cfg chaosConfig, retention, every time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Soak run\n\n- %s at %.1f starts/s (%d instances; work step %d–%d ms, a wait for an event sent twice, a last activity), three nodes on one Redis (appendfsync always), engine.retention %s, a sample every %s\n",
		elapsed.Round(time.Second), cfg.Rate, cfg.Instances, cfg.WorkMS[0], cfg.WorkMS[1], retention, every)
	fmt.Fprintf(&b, "- %d of %d instances did not complete with the right output\n\n", wrong.failed, wrong.checked)
	if len(growth) > 0 && len(samples) >= 6 {
		third := len(samples) / 3
		b.WriteString("## Growth\n\nMedians of each third of the samples; the check compares the last with the second.\n\n| series | first third | second third | last third | verdict |\n|---|---|---|---|---|\n")
		for i, s := range soakAllSeries(len(samples[0].Nodes)) {
			verdict := "flat"
			if growth[i].failed > 0 {
				verdict = "**grows**: " + growth[i].examples[0]
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", s.name,
				human(s.name, medianOf(samples[:third], s.get)), human(s.name, medianOf(samples[third:2*third], s.get)),
				human(s.name, medianOf(samples[2*third:], s.get)), verdict)
		}
	}
	b.WriteString("\n## Samples\n\nRedis's memory and keys in all, and outside the 24h windows (event records and fence counters, whose count is shown).\n\n| time | started | RSS MiB (per node) | goroutines | open files | Redis MiB | outside windows | Redis keys | outside windows | event records | fence counters | AOF MiB |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	t0 := samples[0].At
	for _, s := range samples {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f | %.1f |\n", s.At.Sub(t0).Round(time.Second), s.Started,
			joinNodes(s, func(n nodeSample) string { return fmt.Sprintf("%.0f", n.RSS/(1<<20)) }),
			joinNodes(s, func(n nodeSample) string { return fmt.Sprint(n.Goroutines) }),
			joinNodes(s, func(n nodeSample) string { return fmt.Sprint(n.OpenFiles) }),
			s.RedisMem/(1<<20), (s.RedisMem-s.WindowedMem)/(1<<20), s.RedisKeys, s.RedisKeys-s.Events-s.Fences, s.Events, s.Fences, s.AOF/(1<<20))
	}
	return b.String()
}

func human(series string, v float64) string {
	if strings.HasSuffix(series, "RSS") || strings.HasSuffix(series, "memory") {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}
