// Command pebble measures, for issue 40, a store-shaped durable commit on
// Pebble (github.com/cockroachdb/pebble/v2): one batch that sets an instance
// record of 1 KiB, sets one history entry of 200 B and deletes one small
// key, committed with pebble.Sync from -writers goroutines (Pebble's commit
// pipeline groups concurrent synced commits into one WAL sync). It prints
// one JSON line ("H40J {...}").
//
//	pebble -mode commit -writers 50 -commits 20000 -dir DIR
//	pebble -mode idle -dir DIR      # open time and RSS of an idle DB
//
// -index-keys N adds N small keys to each commit (as the store's create
// writes its list indexes).
//
// Options: Pebble's defaults, WAL on, Cache 64 MiB. With H40J_PERF_CTL and
// H40J_PERF_ACK set (perf stat --control fifo:CTL,ACK -D -1), perf counts
// only the timed part.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

func perfCtl(cmd string) {
	ctl, ack := os.Getenv("H40J_PERF_CTL"), os.Getenv("H40J_PERF_ACK")
	if ctl == "" {
		return
	}
	if err := os.WriteFile(ctl, []byte(cmd+"\n"), 0); err != nil {
		log.Fatalf("perf %s: %v", cmd, err)
	}
	f, err := os.Open(ack)
	if err != nil {
		log.Fatalf("perf ack: %v", err)
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 16)); err != nil {
		log.Fatalf("perf ack: %v", err)
	}
}

// cpuTime returns the user and system CPU time of this process.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// rssKiB is VmRSS of this process.
func rssKiB() int {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// id is a random-looking instance id for commit i (splitmix64).
func id(i int64) string {
	z := uint64(i) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return fmt.Sprintf("%016x", z^(z>>31))
}

func inboxKey(i int64) []byte { return fmt.Appendf(nil, "x/%08d", i) }

func open(dir string) (*pebble.DB, *pebble.Cache) {
	cache := pebble.NewCache(64 << 20)
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache})
	if err != nil {
		log.Fatalf("open %s: %v", dir, err)
	}
	return db, cache
}

func main() {
	mode := flag.String("mode", "commit", "commit or idle")
	writers := flag.Int("writers", 1, "concurrent writers")
	commits := flag.Int("commits", 1000, "commits in all")
	dir := flag.String("dir", "", "the database's directory")
	indexKeys := flag.Int("index-keys", 0, "commit mode: small index keys set by each commit besides its three writes")
	idle := flag.Duration("idle", 5*time.Second, "idle mode: how long to stay open")
	flag.Parse()
	if *dir == "" {
		log.Fatal("-dir is required")
	}
	out := map[string]any{"engine": "pebble", "mode": *mode}
	switch *mode {
	case "idle":
		runtime.GC()
		rss0 := rssKiB()
		t0 := time.Now()
		db, cache := open(*dir)
		out["open_ms"] = float64(time.Since(t0).Microseconds()) / 1000
		out["rss_before_kib"], out["rss_open_kib"] = rss0, rssKiB()
		time.Sleep(*idle) // idle on purpose: what the DB holds at rest
		out["rss_idle_kib"] = rssKiB()
		out["goroutines"] = runtime.NumGoroutine()
		if err := db.Close(); err != nil {
			log.Fatal(err)
		}
		cache.Unref()
	case "commit":
		db, cache := open(*dir)
		vars, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 1000)})
		record := []byte(`{"id":"","workflow":"bench","status":"running","vars":` + string(vars) + `}`)[:1024:1024]
		history := []byte(`{"seq":1,"type":"step_completed","step":"charge","time":"2026-11-30T00:00:00Z","output":"` + strings.Repeat("y", 200) + `"}`)[:200:200]
		small := []byte(`{"due":"2026-11-30T00:00:00Z"}`)
		fill := db.NewBatch()
		for i := int64(1); i <= int64(*commits); i++ {
			_ = fill.Set(inboxKey(i), small, nil)
		}
		if err := fill.Commit(pebble.Sync); err != nil {
			log.Fatal(err)
		}
		_ = fill.Close()
		m0 := db.Metrics()
		lat := make([][]time.Duration, *writers)
		var next atomic.Int64
		var wg sync.WaitGroup
		perfCtl("enable")
		u0, s0 := cpuTime()
		t0 := time.Now()
		for w := range *writers {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > int64(*commits) {
						return
					}
					start := time.Now()
					k := id(i)
					b := db.NewBatch()
					_ = b.Set([]byte("i/"+k), record, nil)
					_ = b.Set(binary.BigEndian.AppendUint64([]byte("h/"+k+"\x00"), 1), history, nil)
					_ = b.Delete(inboxKey(i), nil)
					for j := range *indexKeys {
						_ = b.Set(fmt.Appendf(nil, "ix/%d/2026-11-30T00:00:00.000000000Z/bench/pending/%s", j, k), nil, nil)
					}
					if err := b.Commit(pebble.Sync); err != nil {
						log.Fatalf("commit %d: %v", i, err)
					}
					_ = b.Close()
					lat[w] = append(lat[w], time.Since(start))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(t0)
		u1, s1 := cpuTime()
		cpu, cpuSys := u1-u0+s1-s0, s1-s0
		perfCtl("disable")
		m1 := db.Metrics()
		all := slices.Concat(lat...)
		slices.Sort(all)
		q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
		// A check that the data is there: one record read back.
		if v, closer, err := db.Get([]byte("i/" + id(1))); err != nil || !bytes.Equal(v, record) {
			log.Fatalf("read back: %v", err)
		} else {
			_ = closer.Close()
		}
		out["writers"], out["commits"], out["index_keys"] = *writers, *commits, *indexKeys
		out["secs"], out["commits_per_s"] = elapsed.Seconds(), float64(*commits)/elapsed.Seconds()
		out["p50_us"], out["p90_us"], out["p99_us"] = q(0.5), q(0.9), q(0.99)
		out["cpu_us_per_commit"] = float64(cpu.Microseconds()) / float64(*commits)
		out["cpu_sys_us_per_commit"] = float64(cpuSys.Microseconds()) / float64(*commits)
		out["wal_bytes_per_commit"] = float64(m1.WAL.BytesWritten-m0.WAL.BytesWritten) / float64(*commits)
		out["flushes"] = m1.Flush.Count - m0.Flush.Count
		out["compactions"] = m1.Compact.Count - m0.Compact.Count
		if err := db.Close(); err != nil {
			log.Fatal(err)
		}
		cache.Unref()
	default:
		log.Fatalf("-mode %q: want commit or idle", *mode)
	}
	b, _ := json.Marshal(out)
	fmt.Println("H40J " + string(b))
}
