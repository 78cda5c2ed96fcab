// Package redistest starts real redis-server processes for tests: each on a
// free loopback port, with its own directory, AOF on and no RDB snapshots,
// and the controls that failure tests need (stop, kill, restart on the same
// port and data, pause and resume).
//
// A test never skips for want of Redis: a missing binary fails the test and
// names the package to install, because a skipped cluster test looks like a
// passing one.
//
//	s := redistest.Start(t, redistest.WithAppendFsync("always"))
//	c := s.Client(t) // go-redis v9, closed at cleanup
//	// ... write through c ...
//	s.Kill(t)    // crash it
//	s.Restart(t) // same port and directory: the AOF is replayed
//
// # Notes
//
//   - Each server is configured as production cluster mode requires (see
//     docs/cluster.md): appendonly yes, maxmemory-policy noeviction, and
//     appendfsync everysec unless [WithAppendFsync] says otherwise.
//   - The process gets SIGKILL if the test binary dies (Linux), so aborted
//     runs leave no servers behind.
//   - DEBUG commands are enabled for loopback clients, for tests that want
//     DEBUG SLEEP and friends.
//
// # Clusters
//
// [StartCluster] starts one node in cluster mode that owns every slot: enough
// to check that commands stay within one slot. [StartClusterOf] starts a real
// Redis Cluster of several masters with replicas, formed by redis-cli, for
// tests of partitioning and failover: kill the master of a key's slot, wait
// for its replica's promotion ([Cluster.WaitFailover]), restart the old
// master and it rejoins as a replica.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Binary is where the Debian package redis-server installs the server.
const Binary = "/usr/bin/redis-server"

const (
	// startPatience bounds the wait for a started server to answer PING
	// with its data loaded.
	startPatience = 30 * time.Second
	// stopPatience bounds the wait for a signalled server to exit.
	stopPatience = 30 * time.Second
	// portTries is how many free ports Start tries before giving up: a
	// port found free may be taken by another process before the server
	// binds it.
	portTries = 5
)

// Option configures a server started by [Start].
type Option func(*config)

type config struct {
	binary      string // Binary, or another path in this package's tests
	appendFsync string // "always" | "everysec"
	save        string // RDB snapshot rules; "" disables snapshots
	cluster     bool   // cluster-enabled yes (StartCluster)
	// nodeTimeout is cluster-node-timeout when nodeTimeoutSet, else Redis's
	// default (15s) applies; see WithClusterNodeTimeout.
	nodeTimeout    time.Duration
	nodeTimeoutSet bool
	cli            string // redis-cli, which StartClusterOf forms a cluster with
}

// WithAppendFsync sets the AOF fsync policy: "always" (every write is on
// disk before the reply) or "everysec" (the default; a kill may lose up to
// about a second of writes). Start fails the test for any other value.
func WithAppendFsync(policy string) Option {
	return func(c *config) { c.appendFsync = policy }
}

// WithSnapshots turns RDB snapshots on with Redis's save rules, such as
// "900 1 300 10". By default the server takes no snapshots and relies on
// the AOF alone.
func WithSnapshots(rules string) Option {
	return func(c *config) { c.save = rules }
}

// Server is one redis-server process owned by a test. Its methods are safe
// for concurrent use.
type Server struct {
	cfg  config
	dir  string
	port int
	bus  int // the cluster bus port, in cluster mode

	mu     sync.Mutex
	cmd    *exec.Cmd     // the running process, nil when stopped
	exited chan struct{} // closed when cmd has exited
	paused bool
}

// Start starts a redis-server on a free 127.0.0.1 port with a directory of
// its own under t.TempDir(), waits until it answers PING, and stops it when
// the test ends. It fails the test with "install redis-server (make deps)"
// when the binary is missing.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := config{binary: Binary, appendFsync: "everysec"}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.appendFsync != "always" && cfg.appendFsync != "everysec" {
		t.Fatalf("redistest: WithAppendFsync(%q): want \"always\" or \"everysec\"", cfg.appendFsync)
	}
	if cfg.nodeTimeoutSet && (cfg.nodeTimeout <= 0 || cfg.nodeTimeout%time.Millisecond != 0) {
		t.Fatalf("redistest: WithClusterNodeTimeout(%s): want a positive number of milliseconds", cfg.nodeTimeout)
	}
	if _, err := os.Stat(cfg.binary); err != nil {
		t.Fatalf("redistest: %s not found: install redis-server (make deps): %v", cfg.binary, err)
	}
	s := &Server{cfg: cfg, dir: t.TempDir()}
	t.Cleanup(func() { s.stop(t, syscall.SIGTERM) })
	var errs []error
	for range portTries {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: finding a free port: %v", err)
		}
		s.port = port
		if cfg.cluster {
			if s.bus, err = freePort(); err != nil {
				t.Fatalf("redistest: finding a free port: %v", err)
			}
		}
		err = s.start()
		if err == nil {
			return s
		}
		errs = append(errs, err)
	}
	t.Fatalf("redistest: redis-server did not start after %d ports: %v", portTries, errors.Join(errs...))
	return nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across Restart.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Dir returns the server's working directory, which holds its
// configuration, log and AOF.
func (s *Server) Dir() string { return s.dir }

// Options returns go-redis options for a client of this server: context
// deadlines bound every call (ContextTimeoutEnabled), a refused dial is not
// retried within a command (go-redis would otherwise spend about 1.7s per
// command on a stopped server), and dial, read and write timeouts are short
// so that a paused server fails calls within seconds. Commands are still
// retried on a broken connection, so a client survives a Restart. Each call
// returns a fresh copy to adjust.
//
// After a server was down, go-redis may answer with the last dial error
// for up to a second after it is back: it redials in the background once
// every connection of the pool failed to dial.
func (s *Server) Options() *redis.Options {
	return &redis.Options{
		Addr:                  s.Addr(),
		ContextTimeoutEnabled: true,
		DialerRetries:         1,
		DialTimeout:           time.Second,
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
	}
}

// Client returns a go-redis client with [Server.Options], closed when the
// test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.Options())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop sends SIGTERM and waits until the server has exited; with AOF on,
// every acknowledged write is then on disk. Stopping a stopped server does
// nothing.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.stop(t, syscall.SIGTERM)
}

// Kill sends SIGKILL and waits until the server has exited: a crash, which
// with appendfsync everysec may lose up to about a second of writes.
// Killing a stopped server does nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.stop(t, syscall.SIGKILL)
}

// Restart stops the server if it is running (SIGTERM) and starts it again
// on the same port and directory, so that it reloads its AOF; it returns
// once PING answers and loading is done.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.stop(t, syscall.SIGTERM)
	// The port was ours a moment ago; another process may have grabbed it
	// in between, so retry for a while before failing.
	deadline := time.Now().Add(startPatience)
	for {
		err := s.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: restarting redis-server on %s: %v", s.Addr(), err)
		}
		time.Sleep(100 * time.Millisecond) // wait for a port to be released: nothing to signal on
	}
}

// Pause stops the process with SIGSTOP: connections stay open and calls
// hang until Resume, as with a stalled VM.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGSTOP, true)
}

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGCONT, false)
}

func (s *Server) signal(t testing.TB, sig syscall.Signal, paused bool) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		t.Fatalf("redistest: %s: server on %s is not running", sig, s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("redistest: %s to redis-server on %s: %v", sig, s.Addr(), err)
	}
	s.paused = paused
}

// stop signals the running process, if any, and waits for it to exit. A
// paused process is continued after the signal so that it can act on
// SIGTERM.
func (s *Server) stop(t testing.TB, sig syscall.Signal) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("redistest: %s to redis-server on %s: %v", sig, s.Addr(), err)
	}
	if s.paused {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		s.paused = false
	}
	timer := time.NewTimer(stopPatience)
	defer timer.Stop()
	select {
	case <-s.exited:
	case <-timer.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
		t.Errorf("redistest: redis-server on %s did not exit within %s of %s; killed it\n%s", s.Addr(), stopPatience, sig, s.logTail())
	}
	s.cmd, s.exited = nil, nil
}

// start writes the configuration, starts the process and waits until it
// answers PING with its data loaded. On failure the process is gone.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	conf := filepath.Join(s.dir, "redis.conf")
	if err := os.WriteFile(conf, []byte(s.conf()), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", conf, err)
	}
	cmd := exec.Command(s.cfg.binary, conf)
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.cfg.binary, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err := s.waitReady(exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%w\n%s", err, s.logTail())
	}
	s.cmd, s.exited, s.paused = cmd, exited, false
	return nil
}

// conf returns the server's configuration file.
func (s *Server) conf() string {
	save := `""`
	if s.cfg.save != "" {
		save = s.cfg.save
	}
	return strings.Join([]string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(s.port),
		"dir " + strconv.Quote(s.dir),
		"logfile " + strconv.Quote(filepath.Join(s.dir, "redis.log")),
		"daemonize no",
		"appendonly yes",
		"appendfsync " + s.cfg.appendFsync,
		"save " + save,
		"maxmemory-policy noeviction",
		"enable-debug-command local",
		"",
	}, "\n") + s.clusterConf()
}

// clusterConf is the configuration of cluster mode, when it is on.
func (s *Server) clusterConf() string {
	if !s.cfg.cluster {
		return ""
	}
	lines := []string{
		"cluster-enabled yes",
		"cluster-port " + strconv.Itoa(s.bus),
		"cluster-config-file nodes.conf",
		// Every node tells the others the address its tests dial.
		"cluster-announce-ip 127.0.0.1",
		// A replica may take over however long it has not heard from its
		// master: on a loaded test machine a slot must not stay masterless.
		"cluster-replica-validity-factor 0",
		// A master syncs a replica at once instead of waiting 5s for others.
		"repl-diskless-sync-delay 0",
	}
	if s.cfg.nodeTimeoutSet {
		lines = append(lines, "cluster-node-timeout "+strconv.FormatInt(s.cfg.nodeTimeout.Milliseconds(), 10))
	}
	return strings.Join(append(lines, ""), "\n")
}

// waitReady polls the server until PING answers and INFO says loading is
// done, the process exits, or startPatience passes.
func (s *Server) waitReady(exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), startPatience)
	defer cancel()
	c := redis.NewClient(&redis.Options{
		Addr:                  s.Addr(),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		PoolSize:              1,
	})
	defer c.Close()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		last = ready(ctx, c)
		if last == nil && s.cfg.cluster {
			last = clusterReady(ctx, c)
		}
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited before answering: %w", s.Addr(), last)
		case <-ctx.Done():
			return fmt.Errorf("redis-server on %s not ready within %s: %w", s.Addr(), startPatience, last)
		case <-tick.C:
		}
	}
}

// clusterReady reports nil once a cluster node that owns slots says its
// cluster is ok (after a restart it takes a moment), or at once for a new
// node, which owns none yet (StartCluster gives it them).
func clusterReady(ctx context.Context, c *redis.Client) error {
	info, err := c.ClusterInfo(ctx).Result()
	switch {
	case err != nil:
		return err
	case strings.Contains(info, "cluster_slots_assigned:0\r"), strings.Contains(info, "cluster_state:ok"):
		return nil
	}
	return errors.New("its cluster is not ok yet")
}

// ready reports nil once the server answers PING and has loaded its data.
func ready(ctx context.Context, c *redis.Client) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return err
	}
	info, err := c.Info(ctx, "persistence").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "loading:0") {
		return errors.New("still loading its data")
	}
	return nil
}

// logTail returns the end of the server's log, for failure messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return "(no redis.log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(len(lines)-15, 0):]
	return "redis.log:\n" + strings.Join(lines, "\n")
}
