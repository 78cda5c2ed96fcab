package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/config"
	"github.com/weftworks/weft/internal/testplugins"
)

// buildWeft builds the weft binary into a temporary directory.
func buildWeft(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weft")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serveProcess is `weft serve` running as a child process.
type serveProcess struct {
	cmd   *exec.Cmd
	addr  string
	lines chan map[string]any // the JSON log, line by line
	exit  chan error
}

func startProcess(t *testing.T, bin string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Dir = t.TempDir()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, lines: make(chan map[string]any, 1000), exit: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				p.lines <- m
			}
		}
		close(p.lines)
		p.exit <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	p.addr = p.waitLog(t, "weft is serving")["addr"].(string)
	return p
}

// waitLog reads the log until a line with msg, within a deadline.
func (p *serveProcess) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-p.lines:
			if !ok {
				t.Fatalf("the process ended before logging %q", msg)
			}
			if m["msg"] == msg {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q in the log within 60s", msg)
		}
	}
}

// wait returns the process's exit code, within a deadline.
func (p *serveProcess) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exit:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(60 * time.Second):
		t.Fatal("the process did not exit within 60s")
		return -1
	}
}

func TestServeSignals(t *testing.T) {
	t.Parallel()
	bin := buildWeft(t)
	cache := "plugins.cache_dir=" + testplugins.CacheDir(t)

	t.Run("SIGTERM shuts down gracefully", func(t *testing.T) {
		t.Parallel()
		p := startProcess(t, bin, "--data-dir", t.TempDir(), "--set", cache)
		resp, err := http.Get("http://" + p.addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		p.waitLog(t, "weft stopped")
		if code := p.wait(t); code != exitOK {
			t.Errorf("exit %d after SIGTERM, want 0", code)
		}
	})

	t.Run("a second signal exits at once", func(t *testing.T) {
		t.Parallel()
		p := startProcess(t, bin, "--data-dir", t.TempDir(), "--set", cache, "--set", "http.shutdown_timeout=5m")
		// A request whose body never finishes holds the graceful shutdown,
		// which drains requests in flight.
		conn, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\":")
		// Connections are accepted in order: once a later one is answered,
		// the server holds the half-sent request.
		resp, err := http.Get("http://" + p.addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		p.waitLog(t, "shutting down; a second signal stops at once")
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t); code != exitInterrupted {
			t.Errorf("exit %d after a second signal, want %d", code, exitInterrupted)
		}
		_, _ = io.Copy(io.Discard, conn)
	})

	t.Run("invalid configuration names the key", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(bin, "serve", "--data-dir", t.TempDir())
		cmd.Env = append(cmd.Environ(), "WEFT_ENGINE_LOCK_TTL=fast")
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != exitFailed || !strings.Contains(string(out), "engine.lock_ttl (from env WEFT_ENGINE_LOCK_TTL)") {
			t.Errorf("exit %v, output:\n%s", err, out)
		}
	})
}

// TestShutdownBoundedWhenCloseHangs: a node whose Close never returns (a
// stuck plugin call or store) does not hold the shutdown past its
// timeout; shutdown says what did not finish.
func TestShutdownBoundedWhenCloseHangs(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(parseHostFlags(t, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--set", "plugins.cache_dir="+testplugins.CacheDir(t)).sources(t.TempDir(), nil))
	if err != nil {
		t.Fatal(err)
	}
	s, err := openServer(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.start()
	closeNode, entered, release, closed := s.closeNode, make(chan struct{}), make(chan struct{}), make(chan error, 1)
	s.closeNode = func() error {
		close(entered)
		<-release
		err := closeNode()
		closed <- err
		return err
	}
	defer func() {
		close(release)
		select {
		case <-entered:
		default:
			return // never called (the test failed): nothing to wait for
		}
		if err := <-closed; err != nil {
			t.Errorf("closing the node once released: %v", err)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "closing the node") {
			t.Errorf("shutdown = %v, want the node's close reported as not finished in time", err)
		}
		// The close runs on a goroutine of its own, which a loaded
		// machine may start after the timeout.
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("shutdown returned without closing the node")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown waited for a node close that never returns, far past its 2s timeout")
	}
}

// TestAwaitResultPrefersAResultGiven: a part of the shutdown that has
// stopped is not reported as stuck because the shutdown's time ran out
// before it was asked; one that has not stopped is.
func TestAwaitResultPrefersAResultGiven(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 100 { // select alone would pick ctx.Done about half the time
		ch := make(chan error, 1)
		ch <- errors.New("stopped badly")
		if ok, err := awaitResult(ctx, ch); !ok || err == nil || err.Error() != "stopped badly" {
			t.Fatalf("a result given, ctx ended: awaitResult = %v, %v; want true and the result", ok, err)
		}
	}
	if ok, err := awaitResult(ctx, make(chan error)); ok || err != nil {
		t.Errorf("no result, ctx ended: awaitResult = %v, %v; want false", ok, err)
	}
}
