//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store/redisstore"
)

// The rig the chaos and soak tests share: a real redis-server (or a real
// Redis Cluster) and real `weft serve --store redis` processes on loopback
// that the test can kill, restart on their data directories, pause and
// resume while it drives them over HTTP. Unlike startProcess, a rig node
// writes its log to a file (a long run logs far more than a channel can
// hold unread) and survives restarts under the same node id and data
// directory.

// nodeState is where a rig node's process is.
type nodeState int

const (
	nodeDown     nodeState = iota // no process
	nodeStarting                  // started, not serving yet
	nodeUp                        // serving
	nodePaused                    // SIGSTOP
)

func (s nodeState) String() string {
	return [...]string{"down", "starting", "up", "paused"}[s]
}

// rigNode is one `weft serve` of a rig, across its restarts.
type rigNode struct {
	id      string
	dataDir string
	logPath string
	bin     string
	args    []string // everything after `serve` but --listen and --log-format
	hc      *http.Client

	mu     sync.Mutex
	state  nodeState
	cmd    *exec.Cmd
	c      *client.Client // while up or paused
	addr   string
	exited chan struct{} // closed when the current process has exited
	boots  int
	err    error // why the last start failed, if it did
}

// start starts the node's process and returns at once; the node is up
// once it logs that it serves. A start that fails is recorded in n.err.
func (n *rigNode) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != nodeDown {
		return fmt.Errorf("node %s: start while %s", n.id, n.state)
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %s: opening its log: %w", n.id, err)
	}
	cmd := exec.Command(n.bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, n.args...)...)
	cmd.Dir = n.dataDir
	// The kernel kills the node when the test process dies, so that an
	// aborted run leaves no host behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return fmt.Errorf("node %s: %w", n.id, err)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("node %s: starting %s: %w", n.id, n.bin, err)
	}
	n.boots++
	n.state, n.cmd, n.err = nodeStarting, cmd, nil
	exited := make(chan struct{})
	n.exited = exited
	go func() {
		defer close(exited)
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		serving := false
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logf.Write(append(line, '\n'))
			if serving {
				continue
			}
			var m struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &m) == nil && m.Msg == "weft is serving" {
				serving = true
				n.serving(cmd, m.Addr)
			}
		}
		err := cmd.Wait()
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cmd == cmd {
			if !serving {
				n.err = fmt.Errorf("node %s exited before serving: %v (log %s)", n.id, err, n.logPath)
			}
			n.state, n.cmd, n.c = nodeDown, nil, nil
		}
	}()
	return nil
}

// serving records that the process cmd serves on addr.
func (n *rigNode) serving(cmd *exec.Cmd, addr string) {
	c, err := client.New(client.Config{Server: "http://" + addr, HTTPClient: n.hc})
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != cmd {
		return // killed meanwhile
	}
	if err != nil {
		n.err = fmt.Errorf("node %s: client for %s: %w", n.id, addr, err)
		return
	}
	n.addr, n.c = addr, c
	if n.state == nodeStarting {
		n.state = nodeUp
	}
}

// signal sends sig to the running process and moves the node to state.
func (n *rigNode) signal(sig syscall.Signal, from []nodeState, to nodeState) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	ok := false
	for _, s := range from {
		ok = ok || n.state == s
	}
	if !ok || n.cmd == nil {
		return fmt.Errorf("node %s: %s while %s", n.id, sig, n.state)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("node %s: %s: %w", n.id, sig, err)
	}
	n.state = to
	return nil
}

// kill sends SIGKILL (continuing a paused process too) and waits until the
// process has exited.
func (n *rigNode) kill() error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("node %s (pid %d) did not exit within 30s of SIGKILL", n.id, cmd.Process.Pid)
	}
}

// client returns the node's client when it is up.
func (n *rigNode) client() (*client.Client, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.c, n.state == nodeUp
}

func (n *rigNode) status() (nodeState, int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state, n.boots, n.err
}

// rigRedis is what a rig's nodes store their state in.
type rigRedis string

const (
	// redisSingle is one redis-server; every node runs with --redis-addr.
	redisSingle rigRedis = "single"
	// redisCluster is a Redis Cluster of three masters with one replica
	// each; every node runs with --redis-cluster and waits for a replica
	// to have each write before it answers (redis.wait_replicas 1, see
	// docs/cluster.md, "Durability across failover"), so that a master's
	// death loses nothing acknowledged.
	redisCluster rigRedis = "cluster"
)

// The keys whose slots the cluster rig's faults aim at: every key of the
// store shares the first one's hash tag, every key of the ready queue the
// second's (docs/cluster.md, "Where things live").
const (
	storeSlotKey = "{weft:}schema"
	queueSlotKey = "{weft:queue}"
)

// rig is a Redis and the nodes on it.
type rig struct {
	t       *testing.T
	redis   rigRedis
	srv     *redistest.Server  // redisSingle's server
	cluster *redistest.Cluster // redisCluster's cluster
	nodes   []*rigNode
	dir     string // where the nodes' logs go
	hc      *http.Client
}

// startRig starts Redis (AOF, appendfsync always) and n nodes with the
// extra serve arguments, and waits until every node serves. Node logs go
// to logDir.
func startRig(t *testing.T, bin string, n int, logDir string, args ...string) *rig {
	t.Helper()
	return startRigOn(t, bin, redisSingle, n, logDir, args...)
}

// startRigOn is startRig on the Redis that on names: one redis-server, or
// a Redis Cluster of three masters with a replica each (every node
// appendfsync always too), which the nodes reach through its seeds and on
// which each of their writes waits for a replica.
func startRigOn(t *testing.T, bin string, on rigRedis, n int, logDir string, args ...string) *rig {
	t.Helper()
	// One transport for every node: keep-alive connections to a node that
	// died fail once and are dropped.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	r := &rig{t: t, redis: on, dir: logDir, hc: &http.Client{Transport: tr}}
	var redisArgs []string
	switch on {
	case redisSingle:
		r.srv = redistest.Start(t, redistest.WithAppendFsync("always"))
		redisArgs = []string{"--redis-addr", r.srv.Addr()}
	case redisCluster:
		r.cluster = redistest.StartClusterOf(t, 3, 1, redistest.WithAppendFsync("always"))
		redisArgs = []string{"--redis-cluster", strings.Join(r.cluster.Addrs(), ","), "--set", "redis.wait_replicas=1"}
	default:
		t.Fatalf("rig: Redis %q: want %q or %q", on, redisSingle, redisCluster)
	}
	t.Cleanup(func() {
		for _, n := range r.nodes {
			if err := n.kill(); err != nil {
				t.Error(err)
			}
		}
		tr.CloseIdleConnections()
	})
	for i := range n {
		id := fmt.Sprintf("node%d", i+1)
		node := &rigNode{
			id: id, dataDir: t.TempDir(), logPath: filepath.Join(logDir, id+".log"), bin: bin, hc: r.hc,
			args: append(append([]string{"--store", "redis", "--node-id", id}, redisArgs...), args...),
		}
		node.args = append(node.args, "--data-dir", node.dataDir)
		r.nodes = append(r.nodes, node)
		if err := node.start(); err != nil {
			t.Fatal(err)
		}
	}
	r.waitUp(t, 2*time.Minute)
	return r
}

// waitUp waits until every node that is starting serves.
func (r *rig) waitUp(t *testing.T, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for _, n := range r.nodes {
		for {
			st, _, err := n.status()
			if err != nil {
				t.Fatal(err)
			}
			if st != nodeStarting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s not serving within %s (log %s)", n.id, limit, n.logPath)
			}
			time.Sleep(20 * time.Millisecond) // polling with a deadline
		}
	}
}

// up returns the nodes that serve.
func (r *rig) up() []*rigNode {
	var up []*rigNode
	for _, n := range r.nodes {
		if st, _, _ := n.status(); st == nodeUp {
			up = append(up, n)
		}
	}
	return up
}

// retryable reports whether a call that failed with err may succeed on
// another node or later: the node was unreachable, paused past the call's
// deadline, or answered 5xx (its Redis was down, say).
func retryable(err error) bool {
	var te *client.TransportError
	var p *client.Error
	switch {
	case errors.As(err, &te), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &p):
		return p.Status >= 500
	}
	return false
}

// callStats counts the calls a driver retried, by why.
type callStats struct {
	mu      sync.Mutex
	retries map[string]int
}

func (s *callStats) add(err error) {
	why := "other"
	var te *client.TransportError
	var p *client.Error
	switch {
	case errors.As(err, &te):
		why = "unreachable"
	case errors.Is(err, context.DeadlineExceeded):
		why = "timed out"
	case errors.As(err, &p):
		why = fmt.Sprint(p.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retries == nil {
		s.retries = map[string]int{}
	}
	s.retries[why]++
}

func (s *callStats) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.retries))
	for k, v := range s.retries {
		out[k] = v
	}
	return out
}

// call runs f against a random node that is up, and again on another
// after a short backoff while it fails in a way another node or a moment
// may cure, until ctx ends. Every request the harness makes is idempotent
// (instances and events carry ids), so a retry after a lost answer is
// safe. each bounds one call; a paused node holds a call until then. It
// returns the node that answered.
func (r *rig) call(ctx context.Context, rng *rand.Rand, stats *callStats, each time.Duration, f func(context.Context, *client.Client) error) (string, error) {
	backoff := 20 * time.Millisecond
	var last error
	for {
		if up := r.up(); len(up) > 0 {
			n := up[rng.IntN(len(up))]
			if c, ok := n.client(); ok {
				cctx, cancel := context.WithTimeout(ctx, each)
				last = f(cctx, c)
				cancel()
				if last == nil {
					return n.id, nil
				}
				if !retryable(last) || ctx.Err() != nil {
					return n.id, last
				}
				stats.add(last)
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.New("no node up")
			}
			return "", fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(backoff): // backoff between retries
		}
		backoff = min(2*backoff, time.Second)
	}
}

// openStore opens the store the rig's nodes share, for the checks to read
// what the API does not show; it is closed when the test ends.
func (r *rig) openStore(t *testing.T) *redisstore.Store {
	t.Helper()
	if r.cluster == nil {
		return openRedisStore(t, r.srv)
	}
	st, err := redisstore.Open(t.Context(), redisstore.Config{Client: r.cluster.Client(t)})
	if err != nil {
		t.Fatalf("opening the store on the Redis Cluster %s: %v", strings.Join(r.cluster.Addrs(), ","), err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// postMortem keeps what explains a failed run in dir: each node that runs
// gets SIGQUIT, so that the Go runtime writes every goroutine's stack to
// its log before it exits, and Redis's directory (its AOF) is copied to
// dir/redis, to be loaded by a redis-server for inspection; on a cluster,
// each Redis node's directory (its AOF, log and nodes.conf) to
// dir/redis/PORT.
func (r *rig) postMortem(t *testing.T) {
	t.Helper()
	for _, n := range r.nodes {
		n.mu.Lock()
		cmd, exited := n.cmd, n.exited
		n.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		_ = cmd.Process.Signal(syscall.SIGCONT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Logf("node %s did not exit within 30s of SIGQUIT", n.id)
		}
	}
	dst := filepath.Join(r.dir, "redis")
	if r.cluster == nil {
		r.srv.Stop(t)
		if out, err := exec.Command("cp", "-a", r.srv.Dir(), dst).CombinedOutput(); err != nil {
			t.Logf("copying Redis's directory: %v\n%s", err, out)
			return
		}
		t.Logf("post mortem: goroutine dumps at the end of the node logs, Redis's data in %s", dst)
		return
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Logf("post mortem: %v", err)
		return
	}
	for _, s := range r.cluster.Nodes() {
		s.Stop(t)
		_, port, _ := strings.Cut(s.Addr(), ":")
		if out, err := exec.Command("cp", "-a", s.Dir(), filepath.Join(dst, port)).CombinedOutput(); err != nil {
			t.Logf("copying the directory of Redis %s: %v\n%s", s.Addr(), err, out)
		}
	}
	t.Logf("post mortem: goroutine dumps at the end of the node logs, each Redis node's data in %s/PORT", dst)
}

// cpuPressure samples the kernel's CPU pressure (/proc/pressure/cpu, the
// "some" line: the time during which at least one runnable task waited for
// a CPU) while a run goes on. A timing bound such as the takeover's holds
// only for a host that gets the CPU; on a machine that other work
// saturates, a late takeover says nothing about the host, and the harness
// needs to tell the two apart.
type cpuPressure struct {
	mu      sync.Mutex
	samples []pressureSample
}

type pressureSample struct {
	at    time.Time
	stall time.Duration // cumulative "some" stall time
}

// sampleCPUPressure samples every 100ms until ctx ends; it returns nil
// when the kernel has no pressure information.
func sampleCPUPressure(ctx context.Context) *cpuPressure {
	if _, err := readCPUStall(); err != nil {
		return nil
	}
	p := &cpuPressure{}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if stall, err := readCPUStall(); err == nil {
				p.mu.Lock()
				p.samples = append(p.samples, pressureSample{time.Now(), stall})
				p.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func readCPUStall() (time.Duration, error) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "some ")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				us, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("/proc/pressure/cpu: %q: %w", line, err)
				}
				return time.Duration(us) * time.Microsecond, nil
			}
		}
	}
	return 0, errors.New("/proc/pressure/cpu has no \"some ... total=\" line")
}

// share returns the share of [from, to] during which some task waited for
// a CPU, from the samples around it; -1 when there are none.
func (p *cpuPressure) share(from, to time.Time) float64 {
	if p == nil {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// The last sample at or before from, the first at or after to.
	i := sort.Search(len(p.samples), func(i int) bool { return p.samples[i].at.After(from) }) - 1
	j := sort.Search(len(p.samples), func(i int) bool { return !p.samples[i].at.Before(to) })
	if i < 0 || j >= len(p.samples) || j <= i {
		return -1
	}
	a, b := p.samples[i], p.samples[j]
	return float64(b.stall-a.stall) / float64(b.at.Sub(a.at))
}
