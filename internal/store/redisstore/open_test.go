package redisstore_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/redisstore"
)

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	if err := c.Set(context.Background(), "{newer:}schema", "4", 0).Err(); err != nil {
		t.Fatal(err)
	}
	dead := deadAddr(t)
	deadClient := redis.NewClient(&redis.Options{Addr: dead, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = deadClient.Close() })
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	tests := []struct {
		name string
		cfg  redisstore.Config
		want []string
	}{
		{"no client", redisstore.Config{}, []string{"Client is required"}},
		{"hash tag in the prefix", redisstore.Config{Client: c, Prefix: "a{b}:"}, []string{"Prefix", "a{b}:"}},
		{"negative retention", redisstore.Config{Client: c, DeliveredRetention: -time.Second}, []string{"DeliveredRetention"}},
		{"negative replicas", redisstore.Config{Client: c, WaitReplicas: -1}, []string{"WaitReplicas", "-1"}},
		{"wait too long", redisstore.Config{Client: c, WaitReplicas: 1, WaitTimeout: 2 * time.Minute}, []string{"WaitTimeout", "2m0s"}},
		{"wait under a millisecond", redisstore.Config{Client: c, WaitTimeout: time.Microsecond}, []string{"WaitTimeout", "1µs"}},
		{"wait on a ring", redisstore.Config{Client: ring, WaitReplicas: 1}, []string{"WaitReplicas", "*redis.Ring"}},
		{"nothing listens", redisstore.Config{Client: deadClient}, []string{dead, "ping"}},
		{"newer schema", redisstore.Config{Client: c, Prefix: "newer:"}, []string{srv.Addr(), "{newer:}schema", `schema version "4"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := redisstore.Open(t.Context(), tt.cfg)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestOpenWarnsWithoutAOF: a server without an append-only file is named
// in a warning; with one, nothing is said. A partitioned store warns
// once, not once per partition.
func TestOpenWarnsWithoutAOF(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // its own: the test turns AOF off
	c := srv.Client(t)
	open := func() string {
		var logs logtest.Buffer
		s, err := redisstore.Open(t.Context(), redisstore.Config{Client: c, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		return logs.String()
	}
	if logs := open(); strings.Contains(logs, "WARN") {
		t.Errorf("warning with AOF on: %s", logs)
	}
	if logs := openPartitionedLogs(t, c); strings.Contains(logs, "WARN") {
		t.Errorf("partitioned open warns with AOF on: %s", logs)
	}
	if err := c.ConfigSet(context.Background(), "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if logs := open(); !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "appendonly no") || !strings.Contains(logs, srv.Addr()) {
		t.Errorf("logs without AOF = %q, want a warning naming the address", logs)
	}
	logs := openPartitionedLogs(t, c)
	if n := strings.Count(logs, "level=WARN"); n != 1 || !strings.Contains(logs, "appendonly no") || !strings.Contains(logs, srv.Addr()) {
		t.Errorf("partitioned open without AOF logged %d warnings: %q, want one naming %s", n, logs, srv.Addr())
	}
}

// TestOpenWarnsWithoutAOFOnCluster: on a Redis Cluster every node is
// asked, not the one a keyless CONFIG GET reaches: with AOF off on one
// master, a whole store and a partitioned store (whose catalog may be on
// another master) warn once, naming that master and no other.
func TestOpenWarnsWithoutAOFOnCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartClusterOf(t, 3, 0)
	c := cluster.Client(t)
	masters := cluster.Masters(t)
	off := masters[len(masters)-1]
	if err := off.Client(t).ConfigSet(t.Context(), "appendonly", "no").Err(); err != nil {
		t.Fatalf("turning AOF off on %s: %v", off.Addr(), err)
	}
	var logs logtest.Buffer
	s, err := redisstore.Open(t.Context(), redisstore.Config{Client: c, Prefix: "aof:", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	for name, logs := range map[string]string{"whole": logs.String(), "partitioned": openPartitionedLogs(t, c)} {
		if n := strings.Count(logs, "level=WARN"); n != 1 || !strings.Contains(logs, "appendonly no") || !strings.Contains(logs, off.Addr()) {
			t.Errorf("%s open with AOF off on %s logged %d warnings: %q, want one naming it", name, off.Addr(), n, logs)
		}
		for _, m := range masters[:len(masters)-1] {
			if strings.Contains(logs, m.Addr()) {
				t.Errorf("%s open names %s, which keeps an AOF: %q", name, m.Addr(), logs)
			}
		}
	}
}

// openPartitionedLogs opens and closes a partitioned store of four
// partitions on c under a prefix of its own, and returns what it logged.
func openPartitionedLogs(t *testing.T, c redis.UniversalClient) string {
	t.Helper()
	var logs logtest.Buffer
	s, err := redisstore.OpenPartitioned(t.Context(), redisstore.PartitionedConfig{
		Config:     redisstore.Config{Client: c, Prefix: "aofp-" + strconv.Itoa(int(aofStores.Add(1))) + ":", Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Partitions: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return logs.String()
}

// aofStores numbers openPartitionedLogs's stores.
var aofStores atomic.Int64

// TestErrors: a Redis that went away gives errors naming the operation, the
// id and the address; Close makes every call ErrClosed; a cancelled
// context is returned as such.
func TestErrors(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := open(t, c, "errors:", time.Now)
	if _, err := s.Commit(t.Context(), store.Commit{Instance: &weft.Instance{ID: "i", Workflow: "w", Status: weft.StatusPending}}); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	calls := []struct {
		name string
		call func() error
		want string
	}{
		{"Commit", func() error {
			_, err := s.Commit(t.Context(), store.Commit{Instance: &weft.Instance{ID: "j", Workflow: "w", Status: weft.StatusPending}})
			return err
		}, `commit instance "j"`},
		{"GetInstance", func() error { _, err := s.GetInstance(t.Context(), "i"); return err }, `get instance "i"`},
		{"History", func() error { _, err := s.History(t.Context(), "i", 0, 0); return err }, `history of instance "i"`},
		{"EnqueueStimulus", func() error {
			_, err := s.EnqueueStimulus(t.Context(), weft.Stimulus{ID: "s", Name: "n", ExpiresAt: time.Now().Add(time.Hour)})
			return err
		}, `enqueue stimulus "s"`},
		{"DeletePlugin", func() error { return s.DeletePlugin(t.Context(), "p") }, `delete plugin "p"`},
	}
	for _, tt := range calls {
		err := tt.call()
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), srv.Addr()) {
			t.Errorf("%s with Redis stopped: %v, want it to say %s and %s", tt.name, err, tt.want, srv.Addr())
		}
		if errors.Is(err, weft.ErrNotFound) || errors.Is(err, weft.ErrClosed) {
			t.Errorf("%s with Redis stopped: %v classified as a store answer", tt.name, err)
		}
		if !errors.Is(err, weft.ErrUnavailable) {
			t.Errorf("%s with Redis stopped: %v does not match ErrUnavailable", tt.name, err)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.GetInstance(ctx, "i"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetInstance with a cancelled context: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetInstance(t.Context(), "i"); !errors.Is(err, weft.ErrClosed) {
		t.Errorf("GetInstance after Close: %v, want ErrClosed", err)
	}
}
