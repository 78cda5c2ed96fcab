package boltstore_test

// Issue 40 measurement only (added to internal/store/boltstore through `go
// test -overlay`, see build.sh; never in the package's directory). TestH40J
// runs H40J_COMMITS durable commits from H40J_WRITERS goroutines on a fresh
// store and prints one JSON line ("H40J {...}"). H40J_KIND selects what a
// commit writes:
//
//	store   Store.Commit creating an instance of about 1 KiB of vars with
//	        one history event, as storetest.BenchCommits (BenchmarkCommitWriters)
//	shape   through the store's group commit, raw bbolt: put an instance
//	        record of 1 KiB (bucket h40j_instances), put one history entry of
//	        200 B (h40j_history, key id+seq), delete one small key
//	        (h40j_inbox, filled before the timed part): three buckets
//	shape1  the same three writes in one bucket (keys prefixed i/, h/, x/)
//
// With H40J_PERF_CTL and H40J_PERF_ACK set (perf stat --control
// fifo:CTL,ACK -D -1), perf counts only the timed part.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/boltstore"
	bolt "go.etcd.io/bbolt"
)

func h40jInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// h40jPerf sends cmd ("enable", "disable") to perf stat's control fifo and
// waits for its ack; nothing when perf is not controlling this run.
func h40jPerf(t *testing.T, cmd string) {
	ctl, ack := os.Getenv("H40J_PERF_CTL"), os.Getenv("H40J_PERF_ACK")
	if ctl == "" {
		return
	}
	if err := os.WriteFile(ctl, []byte(cmd+"\n"), 0); err != nil {
		t.Fatalf("perf %s: %v", cmd, err)
	}
	f, err := os.Open(ack)
	if err != nil {
		t.Fatalf("perf ack: %v", err)
	}
	defer f.Close()
	buf := make([]byte, 16)
	if _, err := f.Read(buf); err != nil {
		t.Fatalf("perf ack: %v", err)
	}
}

// h40jCPU returns the user and system CPU time of this process.
func h40jCPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// h40jID is a random-looking instance id for commit i (splitmix64).
func h40jID(i int64) string {
	z := uint64(i) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return fmt.Sprintf("%016x", z^(z>>31))
}

// h40jRSS is VmRSS of this process in KiB.
func h40jRSS() int {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// TestH40JIdle: the open time and RSS of the store at rest (H40J_DIR's
// weft.db, or a new file), over H40J_IDLE_MS.
func TestH40JIdle(t *testing.T) {
	dir := os.Getenv("H40J_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	runtime.GC()
	rss0 := h40jRSS()
	t0 := time.Now()
	s, err := boltstore.Open(filepath.Join(dir, "weft.db"), boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	openMS := float64(time.Since(t0).Microseconds()) / 1000
	rssOpen := h40jRSS()
	time.Sleep(time.Duration(h40jInt(t, "H40J_IDLE_MS", 5000)) * time.Millisecond) // idle on purpose
	out, _ := json.Marshal(map[string]any{"engine": "bbolt", "mode": "idle", "open_ms": openMS,
		"rss_before_kib": rss0, "rss_open_kib": rssOpen, "rss_idle_kib": h40jRSS(), "goroutines": runtime.NumGoroutine()})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("H40J " + string(out))
}

func TestH40J(t *testing.T) {
	kind := os.Getenv("H40J_KIND")
	writers := h40jInt(t, "H40J_WRITERS", 1)
	commits := h40jInt(t, "H40J_COMMITS", 1000)
	dir := os.Getenv("H40J_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "weft.db")
	s, err := boltstore.Open(path, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	vars, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 1000)})
	record := []byte(`{"id":"","workflow":"bench","status":"running","vars":` + string(vars) + `}`)
	record = record[:1024:1024]
	history := []byte(`{"seq":1,"type":"step_completed","step":"charge","time":"2026-11-30T00:00:00Z","output":"` + strings.Repeat("y", 200) + `"}`)[:200:200]
	small := []byte(`{"due":"2026-11-30T00:00:00Z"}`)
	bInst, bHist, bInbox := []byte("h40j_instances"), []byte("h40j_history"), []byte("h40j_inbox")
	one := kind == "shape1"
	inboxKey := func(i int64) []byte { return fmt.Appendf(nil, "x/%08d", i) }
	var commit func(w int, i int64) error
	switch kind {
	case "store":
		commit = func(w int, i int64) error {
			in := &weft.Instance{ID: fmt.Sprintf("bench-%d-%d", w, i), Workflow: "bench", Status: weft.StatusPending, Vars: vars}
			_, err := s.Commit(ctx, store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "created"}}})
			return err
		}
	case "shape", "shape1":
		err := s.H40JRun(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bInst, bHist, bInbox} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			b := tx.Bucket(bInbox)
			for i := int64(1); i <= int64(commits); i++ {
				if err := b.Put(inboxKey(i), small); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		commit = func(w int, i int64) error {
			id := h40jID(i)
			return s.H40JRun(func(tx *bolt.Tx) error {
				bi, bh, bx := tx.Bucket(bInst), tx.Bucket(bHist), tx.Bucket(bInbox)
				ik, hk := []byte("i/"+id), binary.BigEndian.AppendUint64([]byte("h/"+id+"\x00"), 1)
				if !one {
					ik, hk = ik[2:], hk[2:]
				} else {
					bh, bx = bi, bi
				}
				if err := bi.Put(ik, record); err != nil {
					return err
				}
				if err := bh.Put(hk, history); err != nil {
					return err
				}
				return bx.Delete(inboxKey(i))
			})
		}
		if one { // move the small keys into the one bucket
			err := s.H40JRun(func(tx *bolt.Tx) error {
				b := tx.Bucket(bInst)
				for i := int64(1); i <= int64(commits); i++ {
					if err := b.Put(inboxKey(i), small); err != nil {
						return err
					}
				}
				return tx.DeleteBucket(bInbox)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	default:
		t.Fatalf("H40J_KIND=%q: want store, shape or shape1", kind)
	}

	lat := make([][]time.Duration, writers)
	var next atomic.Int64
	var wg sync.WaitGroup
	stats0, tx0 := s.H40JStats(), s.H40JTxID()
	h40jPerf(t, "enable")
	u0, s0 := h40jCPU()
	t0 := time.Now()
	for w := range writers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(commits) {
					return
				}
				start := time.Now()
				if err := commit(w, i); err != nil {
					t.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(start))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	u1, s1 := h40jCPU()
	cpu, cpuSys := u1-u0+s1-s0, s1-s0
	h40jPerf(t, "disable")
	stats1, tx1 := s.H40JStats(), s.H40JTxID()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) != commits {
		t.Fatalf("%d commits done of %d", len(all), commits)
	}
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	txs := tx1 - tx0
	d := stats1.TxStats.Sub(&stats0.TxStats)
	fi, _ := os.Stat(path)
	out, _ := json.Marshal(map[string]any{
		"engine": "bbolt", "kind": kind, "writers": writers, "commits": commits,
		"nofreelistsync": os.Getenv("H40J_NOFREELISTSYNC") == "1", "nogrowsync": os.Getenv("H40J_NOGROWSYNC") == "1",
		"secs": elapsed.Seconds(), "commits_per_s": float64(commits) / elapsed.Seconds(),
		"p50_us": q(0.50), "p90_us": q(0.90), "p99_us": q(0.99),
		"txs": txs, "commits_per_tx": float64(commits) / float64(txs),
		"pages_per_commit": float64(d.GetPageCount()) / float64(commits), "pages_per_tx": float64(d.GetPageCount()) / float64(txs),
		"bolt_writes_per_tx":    float64(d.GetWrite()) / float64(txs),
		"cpu_us_per_commit":     float64(cpu.Microseconds()) / float64(commits),
		"cpu_sys_us_per_commit": float64(cpuSys.Microseconds()) / float64(commits),
		"file_bytes":            fi.Size(), "freelist_inuse_bytes": stats1.FreelistInuse, "free_pages": stats1.FreePageN,
	})
	fmt.Println("H40J " + string(out))
}
