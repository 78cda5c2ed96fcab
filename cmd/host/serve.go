package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/config"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
)

// ErrUnsafeListen: the host was asked to listen beyond loopback without
// any auth.tokens.
var ErrUnsafeListen = errors.New("refusing to listen beyond loopback without authentication")

// exitInterrupted is the exit code after a second signal stopped the host
// without a graceful shutdown (128 + SIGINT, as shells report it).
const exitInterrupted = 130

// server is a running `weft serve`: a node, its API and the listener.
type server struct {
	cfg  *config.Loaded
	log  *slog.Logger
	node *node.Node
	api  *api.Server
	ln   net.Listener
	// closeNode closes the node (node.Close; a test makes it hang).
	closeNode func() error

	stopRun context.CancelFunc
	ran     chan error // node.Run's result
	served  chan error // api.Serve's result
}

// checkListen enforces the rule that a host without auth tokens, whose API
// anyone who can reach it may use, listens on loopback only (README.md,
// "Authentication").
func checkListen(cfg *config.Loaded) error {
	if len(cfg.Auth.Tokens) > 0 || isLoopback(cfg.Listen) {
		return nil
	}
	return fmt.Errorf("%w: listen is %s (from %s) and no auth.tokens are configured; "+
		"configure auth.tokens (name, role, token: see the configuration reference in README.md) "+
		"or listen on a loopback address such as 127.0.0.1:8080", ErrUnsafeListen, cfg.Listen, cfg.SourceOf("listen"))
}

// checkListener enforces the same rule on the address the host actually
// listens on: a name such as "localhost" is whatever the resolver says.
func checkListener(cfg *config.Loaded, addr net.Addr) error {
	if tcp, ok := addr.(*net.TCPAddr); len(cfg.Auth.Tokens) > 0 || ok && tcp.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: listen is %s (from %s), which resolved to %s; configure auth.tokens or listen on 127.0.0.1",
		ErrUnsafeListen, cfg.Listen, cfg.SourceOf("listen"), addr)
}

// isLoopback reports whether addr's host is a loopback IP or "localhost".
// An empty host (":8080") means every interface, which is not loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openServer opens the node, seeds an empty store, builds the API and
// listens. Nothing runs until start.
func openServer(ctx context.Context, cfg *config.Loaded, log *slog.Logger) (_ *server, err error) {
	if err := checkListen(cfg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	n, err := node.Open(ctx, cfg.Node(reg), log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	if len(cfg.SeedDirs) > 0 {
		if err := seed(ctx, n, cfg.SeedDirs, log); err != nil {
			return nil, err
		}
	}
	if cfg.GrantsFile != "" {
		if err := applyGrants(ctx, n, cfg.GrantsFile, cfg.Grants(), log); err != nil {
			return nil, err
		}
	}
	if cfg.SchedulesFile != "" {
		if err := applySchedules(ctx, n, cfg.SchedulesFile, cfg.Schedules(), log); err != nil {
			return nil, err
		}
	}
	apiCfg := cfg.API()
	apiCfg.Logger, apiCfg.Gatherer = log, reg
	srv, err := api.New(apiCfg, n)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen (from %s): %w", cfg.SourceOf("listen"), err)
	}
	if err := checkListener(cfg, ln.Addr()); err != nil {
		_ = ln.Close()
		return nil, err
	}
	// Before any plugin runs: no plugin reaches the host's own API,
	// whatever its grants (docs/outbound-http.md).
	if err := n.ProtectListener(ln.Addr()); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return &server{cfg: cfg, log: log, node: n, api: srv, ln: ln, closeNode: n.Close}, nil
}

// start runs the engine and serves HTTP.
func (s *server) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopRun = cancel
	s.ran = make(chan error, 1)
	s.served = make(chan error, 1)
	go func() { s.ran <- s.node.Run(ctx) }()
	go func() { s.served <- s.api.Serve(s.ln) }()
	attrs := []any{"addr", s.ln.Addr().String(), "node", s.cfg.NodeID, "store", s.cfg.Store, "data_dir", s.cfg.DataDir}
	if t := s.cfg.Tracing; t.On() {
		attrs = append(attrs, "tracing", t.Protocol, "tracing_endpoint", cmp.Or(t.Endpoint, "(the exporter's default)"), "sample_rate", t.SampleRate)
	}
	if len(s.cfg.Auth.Tokens) == 0 {
		s.log.Warn("authentication is off: no auth.tokens configured, so the host listens on loopback only", "addr", s.ln.Addr().String())
	} else {
		attrs = append(attrs, "tokens", len(s.cfg.Auth.Tokens))
	}
	s.log.Info("weft is serving", attrs...)
}

// addr is the address the server listens on.
func (s *server) addr() string { return s.ln.Addr().String() }

// shutdown stops accepting connections and drains requests in flight,
// then stops the engine (running attempts end at a persisted point, or
// their instances are handed back through lease expiry) and closes the
// node, all within ctx: at ctx's end it returns an error saying what had
// not finished, leaving that to the process's exit (the OS then releases
// the store's file lock; nothing acknowledged depends on a close).
func (s *server) shutdown(ctx context.Context) error {
	start := time.Now()
	var errs []error
	if err := s.api.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("draining HTTP requests: %w", err))
	}
	// Fiber's shutdown does not know a listener that Serve has not
	// started on yet; closing it ends such a Serve too. What Serve returns
	// now is only the closed listener.
	_ = s.ln.Close()
	if s.served != nil {
		awaitResult(ctx, s.served)
	}
	if s.stopRun != nil {
		s.stopRun()
		if ok, err := awaitResult(ctx, s.ran); !ok {
			errs = append(errs, fmt.Errorf("the engine did not stop within the shutdown timeout: %w", ctx.Err()))
		} else if err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("engine: %w", err))
		}
	}
	// Close waits for plugin calls in flight and the store's transaction,
	// which a stuck call or store would make wait forever.
	closed := make(chan error, 1)
	go func() { closed <- s.closeNode() }()
	if ok, err := awaitResult(ctx, closed); !ok {
		errs = append(errs, fmt.Errorf("closing the node (plugin runtime, store) did not finish within the shutdown timeout: %w", ctx.Err()))
	} else if err != nil {
		errs = append(errs, fmt.Errorf("closing the node: %w", err))
	}
	err := errors.Join(errs...)
	if err == nil {
		s.log.Info("weft stopped", "took", time.Since(start).Round(time.Millisecond))
	}
	return err
}

// awaitResult returns true and what ch gives, or false when ctx ends
// first. A result already given wins over an ended ctx: when draining the
// requests used up the shutdown timeout, a part that stopped at once is
// not reported as stuck (select alone picks between ready cases at
// random).
func awaitResult(ctx context.Context, ch <-chan error) (bool, error) {
	select {
	case err := <-ch:
		return true, err
	default:
	}
	select {
	case err := <-ch:
		return true, err
	case <-ctx.Done():
		return false, nil
	}
}

// serveCmd is `weft serve`. The first SIGINT or SIGTERM shuts the host
// down gracefully; a second one exits at once.
func serveCmd(args, env []string, stderr io.Writer) int {
	h := newHostFlags("weft serve", stderr)
	if err := h.fs.Parse(args); err != nil {
		return exitUsage
	}
	if h.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "weft serve: unexpected argument %q\n", h.fs.Arg(0))
		return exitUsage
	}
	dir, _ := os.Getwd()
	cfg, err := config.Load(h.sources(dir, env))
	if err != nil {
		fmt.Fprintf(stderr, "weft serve: %v\n", err)
		return exitFailed
	}
	log := cfg.Logger(stderr)
	if cfg.Tracing.On() {
		// The OpenTelemetry SDK reports what goes wrong inside it (a
		// collector's partial success, a resource it cannot read) to the
		// process's one global error handler, by default the standard
		// log package, outside the host's log and its format. The
		// process is the host's: it routes them to its log, once, here.
		// Export failures do not come this way: the node's exporter logs
		// them itself, a line a minute at most (tracing.New).
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: the OpenTelemetry SDK reported an error", "err", err)
		}))
	}
	if cfg.File != "" {
		log.Info("configuration file read", "file", cfg.File)
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	interrupted, watched := make(chan struct{}), make(chan struct{})
	go func() {
		// A signal during start-up abandons it.
		defer close(watched)
		select {
		case <-sigs:
			close(interrupted)
			cancel()
		case <-ctx.Done():
		}
	}()
	s, err := openServer(ctx, cfg, log)
	cancel()
	<-watched // from here on, only the code below reads sigs
	select {
	case <-interrupted:
		// Even when opening finished first: the signal was for us.
		if err == nil {
			// Bounded as a shutdown is: the node's close waits for a
			// plugin compile in progress, which nothing interrupts.
			sctx, scancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
			if err := s.ln.Close(); err != nil {
				log.Warn("closing the listener", "err", err)
			}
			closed := make(chan error, 1)
			go func() { closed <- s.node.Close() }()
			if ok, err := awaitResult(sctx, closed); !ok {
				log.Error("closing the node did not finish within the shutdown timeout", "timeout", cfg.HTTP.ShutdownTimeout)
			} else if err != nil {
				log.Error("closing the node", "err", err)
			}
			scancel()
		}
		log.Info("start-up interrupted by a signal")
		return exitInterrupted
	default:
	}
	if err != nil {
		log.Error("weft cannot start", "err", err)
		return exitFailed
	}
	s.start()

	var runErr error
	select {
	case sig := <-sigs:
		log.Info("shutting down; a second signal stops at once", "signal", sig.String(), "timeout", cfg.HTTP.ShutdownTimeout)
	case runErr = <-s.ran:
		s.ran <- runErr // shutdown reads it again
		log.Error("the engine stopped", "err", runErr)
	case runErr = <-s.served:
		s.served <- runErr
		log.Error("the HTTP server stopped", "err", runErr)
	}
	go func() {
		<-sigs
		log.Error("second signal: exiting without a graceful shutdown")
		os.Exit(exitInterrupted)
	}()
	sctx, scancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer scancel()
	if err := s.shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return exitInternal
	}
	if runErr != nil {
		return exitInternal
	}
	return exitOK
}

// seed loads the plugins (*.wasm) and workflows (*.yaml, *.yml, *.json)
// of dirs into an empty store, and does nothing when the store holds any
// plugin or workflow: it is for a first start. A file that cannot be
// loaded is logged with its problems and does not stop the others.
func seed(ctx context.Context, n *node.Node, dirs []string, log *slog.Logger) error {
	ps, _, err := n.ListPlugins(ctx, "", 1)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	ds, _, err := n.Definitions(ctx, "", 1)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if len(ps) > 0 || len(ds) > 0 {
		log.Debug("seed skipped: the store is not empty")
		return nil
	}
	var wasm, defs []string
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("seed_dirs: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			p := filepath.Join(dir, e.Name())
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".wasm":
				wasm = append(wasm, p)
			case ".yaml", ".yml", ".json":
				defs = append(defs, p)
			}
		}
	}
	if len(wasm)+len(defs) > 0 {
		// Compiling the plugins takes seconds: say so before, not only
		// after, or a first start looks hung.
		log.Info("first start: seeding the store; each plugin is compiled once, which takes a few seconds", "plugins", len(wasm), "workflows", len(defs), "dirs", strings.Join(dirs, ","))
	}
	var plugNames, failed []string
	for _, p := range wasm {
		name := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		start := time.Now()
		b, err := os.ReadFile(p)
		if err == nil {
			_, _, err = n.PutPlugin(ctx, name, b)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Error("seed: plugin not loaded", "file", p, "err", err)
			failed = append(failed, p)
			continue
		}
		log.Info("seed: plugin loaded", "plugin", name, "file", p, "took", time.Since(start).Round(time.Millisecond))
		plugNames = append(plugNames, name)
	}
	// A workflow may start another as a child, which must be saved first:
	// save in rounds until a round saves nothing.
	var wfNames []string
	errs := map[string]error{}
	for pending := defs; len(pending) > 0; {
		var next []string
		for _, p := range pending {
			b, err := os.ReadFile(p)
			if err == nil {
				var d *weft.Definition
				if d, _, err = n.SaveDefinition(ctx, b); err == nil {
					wfNames = append(wfNames, d.Name)
					delete(errs, p)
					continue
				}
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs[p] = err
			next = append(next, p)
		}
		if len(next) == len(pending) {
			break
		}
		pending = next
	}
	for p, err := range errs {
		log.Error("seed: workflow not loaded", "file", p, "err", err)
		failed = append(failed, p)
	}
	sort.Strings(plugNames)
	sort.Strings(wfNames)
	sort.Strings(failed)
	log.Info("first start: seeded the store", "plugins", strings.Join(plugNames, ","), "workflows", strings.Join(wfNames, ","), "failed", len(failed))
	return nil
}
