// Package hosttest starts a real Weft host for tests and examples: a node
// (host/node) on the embedded store in a temporary data directory, with
// its engine running, behind the HTTP API (host/api) on a free loopback
// port, so that the API's, the console's and the client's tests, and the
// client's examples, all exercise one host built one way.
//
// New starts one for a test and stops it when the test ends; Start and
// Close do the same for code without a *testing.T, such as an Example.
package hosttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/testplugins"
)

// The secrets of Tokens, one per role, for tests to authenticate with.
const (
	AdminToken    = "admin-secret-0123456789"
	OperatorToken = "operator-secret-0123456789"
	ReaderToken   = "reader-secret-0123456789"
)

// Tokens returns an admin ("ci"), an operator ("ops") and a reader
// ("dash") token for api.Config.Tokens. The operator's is configured by
// its SHA-256, so that tests also cover a token the host only knows the
// hash of.
func Tokens() []api.Token {
	sum := sha256.Sum256([]byte(OperatorToken))
	return []api.Token{
		{Name: "ci", Role: api.RoleAdmin, Token: AdminToken},
		{Name: "ops", Role: api.RoleOperator, Token: "sha256:" + hex.EncodeToString(sum[:])},
		{Name: "dash", Role: api.RoleReader, Token: ReaderToken},
	}
}

// Options configure a test host. The zero value is a host without tokens
// (every request is an admin's), logging at Info.
type Options struct {
	// API configures the API as api.New takes it. Its Logger is the
	// host's (Host.Logs) and its Gatherer the host's registry unless set;
	// RequestTimeout defaults to 3 minutes, not 30 s, because an upload
	// compiles its plugin within the request's time, which under -race on
	// a loaded two-core machine can pass the API's default.
	API api.Config
	// Node configures the node as node.Open takes it. DataDir and
	// WorkflowsDir default to temporary directories (removed by Close);
	// Engine.NodeID defaults to "n1" (unless NodeID is set) and
	// Engine.TimerInterval to 10 ms, so that timers fire promptly;
	// Registerer defaults to the host's registry. New also points
	// Plugins.CacheDir, unless set, at the compilation cache that test
	// processes share (testplugins.CacheDir).
	Node node.Config
	// LogLevel is the least level Host.Logs captures; the zero value is
	// slog.LevelInfo.
	LogLevel slog.Level
}

// Host is a running test host.
type Host struct {
	// URL is the API's base URL, http://127.0.0.1:port.
	URL string
	// Node is the host's node, for tests that go around the API.
	Node *node.Node
	// Server is the API, for tests that shut it down or read its routes.
	Server *api.Server
	// Logs holds the node's and the API's log lines, as JSON.
	Logs *logtest.Buffer
	// DataDir and WorkflowsDir are the node's.
	DataDir, WorkflowsDir string
	// HTTP is an HTTP client with a transport of its own, whose idle
	// connections Close closes before it shuts the server down: the
	// server's Shutdown waits for every open connection, and on a loaded
	// machine closing keep-alive ones from its side took more than 10 s.
	HTTP *http.Client

	served   chan struct{} // closed when Serve returned, with serveErr
	serveErr error
	stop     context.CancelFunc // stops the engine
	ran      chan struct{}      // closed when the engine's Run returned
	temp     []string           // directories Close removes

	closeOnce sync.Once
	closeErr  error
}

// Start starts a host: it opens the node, runs its engine, and serves the
// API on a free loopback port. Call Close when done.
func Start(o Options) (_ *Host, err error) {
	h := &Host{Logs: &logtest.Buffer{}, served: make(chan struct{}), HTTP: &http.Client{Transport: &http.Transport{}}}
	defer func() {
		if err != nil {
			err = errors.Join(err, h.Close())
		}
	}()
	log := slog.New(slog.NewJSONHandler(h.Logs, &slog.HandlerOptions{Level: o.LogLevel}))

	ncfg := o.Node
	for _, dir := range []*string{&ncfg.DataDir, &ncfg.WorkflowsDir} {
		if *dir == "" {
			if *dir, err = os.MkdirTemp("", "weft-hosttest-"); err != nil {
				return nil, fmt.Errorf("hosttest: %w", err)
			}
			h.temp = append(h.temp, *dir)
		}
	}
	h.DataDir, h.WorkflowsDir = ncfg.DataDir, ncfg.WorkflowsDir
	if ncfg.NodeID == "" && ncfg.Engine.NodeID == "" {
		ncfg.Engine.NodeID = "n1"
	}
	if ncfg.Engine.TimerInterval == 0 {
		ncfg.Engine.TimerInterval = 10 * time.Millisecond
	}
	acfg := o.API
	if ncfg.Registerer == nil && acfg.Gatherer == nil {
		reg := prometheus.NewRegistry()
		ncfg.Registerer, acfg.Gatherer = reg, reg
	}
	if h.Node, err = node.Open(context.Background(), ncfg, log); err != nil {
		return nil, fmt.Errorf("hosttest: opening the node: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	h.stop, h.ran = stop, make(chan struct{})
	go func() { _ = h.Node.Run(ctx); close(h.ran) }()

	if acfg.RequestTimeout == 0 {
		acfg.RequestTimeout = 3 * time.Minute
	}
	if acfg.Logger == nil {
		acfg.Logger = log
	}
	if h.Server, err = api.New(acfg, h.Node); err != nil {
		return nil, fmt.Errorf("hosttest: starting the API: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("hosttest: %w", err)
	}
	h.URL = "http://" + ln.Addr().String()
	go func() { h.serveErr = h.Server.Serve(ln); close(h.served) }()
	return h, nil
}

// New starts a host for t, as Start does, with temporary directories of
// t's and the shared compilation cache, and stops it when t ends; a
// failure to stop fails t. When t has failed, it logs the host's log.
func New(t testing.TB, o Options) *Host {
	t.Helper()
	if o.Node.DataDir == "" {
		o.Node.DataDir = t.TempDir()
	}
	if o.Node.WorkflowsDir == "" {
		o.Node.WorkflowsDir = t.TempDir()
	}
	if o.Node.Plugins.CacheDir == "" {
		o.Node.Plugins.CacheDir = testplugins.CacheDir(t)
	}
	h, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("host log:\n%s", h.Logs)
		}
	})
	return h
}

// Served is closed when the API's Serve has returned, after a Shutdown
// (the test's own, or Close's).
func (h *Host) Served() <-chan struct{} { return h.served }

// ServeErr is what Serve returned; read it once Served is closed.
func (h *Host) ServeErr() error { return h.serveErr }

// Close shuts the API down (waiting up to 30 s for requests in flight),
// stops the engine, closes the node and removes the temporary directories
// Start made. It reports what failed; calling it again returns the first
// result.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		var errs []error
		h.HTTP.CloseIdleConnections()
		if h.Server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := h.Server.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("hosttest: Shutdown: %w", err))
			}
			if h.URL != "" {
				select {
				case <-h.served:
					if h.serveErr != nil {
						errs = append(errs, fmt.Errorf("hosttest: Serve: %w", h.serveErr))
					}
				case <-ctx.Done():
					errs = append(errs, errors.New("hosttest: Serve did not return after Shutdown"))
				}
			}
			cancel()
		}
		h.HTTP.CloseIdleConnections()
		if h.Node != nil {
			if h.stop != nil {
				h.stop()
				<-h.ran
			}
			if err := h.Node.Close(); err != nil {
				errs = append(errs, fmt.Errorf("hosttest: closing the node: %w", err))
			}
		}
		for _, dir := range h.temp {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("hosttest: %w", err))
			}
		}
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}
