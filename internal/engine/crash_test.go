package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
)

// The crash test runs a host in a child process: this test binary, started
// again with WEFT_CRASH_DIR set, which TestMain hands to crashHost.
const crashInstances = 8

func TestMain(m *testing.M) {
	if dir := os.Getenv("WEFT_RESUME_DIR"); dir != "" {
		if err := resumeHost(dir, os.Getenv("WEFT_CRASH_MODE"), os.Getenv("WEFT_CRASH_KIT"), os.Getenv("WEFT_CRASH_CACHE")); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if dir := os.Getenv("WEFT_CRASH_DIR"); dir != "" {
		if err := crashHost(dir, os.Getenv("WEFT_CRASH_MODE"), os.Getenv("WEFT_CRASH_KIT"), os.Getenv("WEFT_CRASH_CACHE"), os.Getenv("WEFT_CRASH_PERSISTENCE")); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childHost is the engine of a host process started by a test (see
// TestMain), on dir's store, blobs and the shared compilation cache. In
// "start" mode it stores the kit plugin from kitPath and saves definition.
// run starts the engine; close stops it and releases everything.
type childHost struct {
	st    *embedded.Store
	e     *engine.Engine
	close func()
}

func openChildHost(dir, mode, kitPath, cache, definition string) (_ *childHost, err error) {
	ctx := context.Background()
	var closers []func()
	h := &childHost{close: func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	if h.st, err = embedded.Open(filepath.Join(dir, "store"), embedded.Config{}); err != nil {
		return nil, err
	}
	closers = append(closers, func() { _ = h.st.Close() })
	blobs, err := blobfile.New(filepath.Join(dir, "blobs"))
	if err != nil {
		return nil, err
	}
	rt, err := plugins.New(ctx, plugins.Config{CacheDir: cache, Logger: slog.New(slog.DiscardHandler)}, blobs)
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { _ = rt.Close(ctx) })
	if h.e, err = engine.New(engine.Config{
		NodeID: "host-" + mode, Workers: 2, LockTTL: time.Second, RecoveryInterval: 100 * time.Millisecond,
		Heartbeat: heartbeat.Config{Tick: 10 * time.Millisecond, Cycle: 200 * time.Millisecond},
		Logger:    slog.New(slog.DiscardHandler),
	}, h.st, local.New(local.Config{}), memqueue.New(100), rt); err != nil {
		return nil, err
	}
	if mode == "start" {
		wasm, err := os.ReadFile(kitPath)
		if err != nil {
			return nil, err
		}
		m, err := rt.Load(ctx, wasm)
		if err != nil {
			return nil, err
		}
		if _, err := h.st.PutPlugin(ctx, weft.PluginRecord{Name: "kit", Version: m.Version, Size: int64(m.Size), Activities: []string{"work"}}); err != nil {
			return nil, err
		}
		if _, _, err := h.e.SaveDefinition(ctx, []byte(definition)); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = h.e.Run(runCtx); close(done) }()
	closers = append(closers, func() { cancel(); <-done })
	return h, nil
}

// crashHost runs an engine on dir. In "start" mode it saves the workflow
// and starts the instances; in both modes it runs until every instance has
// finished, printing "completed N" whenever the count of finished ones
// grows, so that the parent can kill it mid-workflow.
func crashHost(dir, mode, kitPath, cache, persistence string) error {
	ctx := context.Background()
	h, err := openChildHost(dir, mode, kitPath, cache, `
name: crashy
persistence: `+persistence+`
steps:
  - { id: one, activity: kit.work, input: { ms: 120, beat_ms: 20 } }
  - { id: two, activity: kit.work, input: { ms: 120, beat_ms: 20 } }
  - { id: three, activity: kit.work, input: { ms: 120, beat_ms: 20 } }
`)
	if err != nil {
		return err
	}
	defer h.close()
	st, e := h.st, h.e
	if mode == "start" {
		for i := 0; i < crashInstances; i++ {
			if _, _, err := e.Start(ctx, "crashy", json.RawMessage(strconv.Itoa(i)), "crash-"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	last := -1
	for {
		n := 0
		for i := 0; i < crashInstances; i++ {
			inst, err := st.GetInstance(ctx, "crash-"+strconv.Itoa(i))
			if err != nil {
				return err
			}
			if inst.Status.Terminal() {
				n++
			}
		}
		if n != last {
			fmt.Printf("completed %d\n", n)
			last = n
		}
		if n == crashInstances {
			return nil
		}
		time.Sleep(5 * time.Millisecond) // the child polls its own store
	}
}

func TestCrashedHostFinishesEveryInstanceAfterRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts host processes")
	}
	kit := testplugins.Path(t, "kit")
	cache := testplugins.CacheDir(t)
	for _, persistence := range []string{"lazy", "activity"} {
		t.Run(persistence, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			host := func(mode string) (*exec.Cmd, *bufio.Scanner) {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "WEFT_CRASH_DIR="+dir, "WEFT_CRASH_MODE="+mode, "WEFT_CRASH_KIT="+kit,
					"WEFT_CRASH_CACHE="+cache, "WEFT_CRASH_PERSISTENCE="+persistence)
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				return cmd, bufio.NewScanner(out)
			}

			// First host: kill it with SIGKILL once some instances have
			// finished and others have not.
			first, lines := host("start")
			killed := false
			for lines.Scan() {
				var n int
				if _, err := fmt.Sscanf(lines.Text(), "completed %d", &n); err == nil && n >= 1 && n < crashInstances {
					if err := first.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					killed = true
					break
				}
				if strings.HasPrefix(lines.Text(), "error:") {
					t.Fatalf("first host: %s", lines.Text())
				}
			}
			_ = first.Wait()
			if !killed {
				t.Fatal("the first host finished every instance before it could be killed")
			}

			// Second host on the same data dir: finishes every instance.
			second, lines := host("recover")
			for lines.Scan() {
				if strings.HasPrefix(lines.Text(), "error:") {
					t.Fatalf("second host: %s", lines.Text())
				}
			}
			if err := second.Wait(); err != nil {
				t.Fatalf("second host: %v", err)
			}

			st, err := embedded.Open(filepath.Join(dir, "store"), embedded.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			rerun := 0
			for i := 0; i < crashInstances; i++ {
				id := "crash-" + strconv.Itoa(i)
				inst, err := st.GetInstance(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if inst.Status != weft.StatusCompleted {
					t.Fatalf("%s: %s %+v", id, inst.Status, inst.Error)
				}
				evs, err := st.History(ctx, id, 0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range evs {
					if e.Node == "host-recover" && (e.Type == "instance_started" || e.Type == "attempt_abandoned") {
						rerun++
						break
					}
				}
			}
			if rerun == 0 {
				t.Errorf("no instance's history shows the second host re-running it")
			}
			t.Logf("%s: %d of %d instances re-run by the second host", persistence, rerun, crashInstances)
		})
	}
}
