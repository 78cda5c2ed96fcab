package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

func loadFile(t *testing.T, rt *plugins.Runtime, path string) string {
	t.Helper()
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	return m.Version
}

func TestFilesystemPluginRefusedAtUpload(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, plugins.Config{})
	wasm, err := os.ReadFile(testplugins.Testdata(t, "plugins/testdata/escape"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Load(context.Background(), wasm)
	var ve *plugins.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v, want a *ValidationError", err)
	}
	all := strings.Join(ve.Problems, "\n")
	for _, imp := range []string{"path_open", "fd_readdir"} {
		if !strings.Contains(all, "wasi_snapshot_preview1."+imp+": not allowed") {
			t.Errorf("problems do not name %s:\n%s", imp, all)
		}
	}
}

func TestSandboxFromInside(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, plugins.Config{})
	v := loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/sandbox"))
	before := time.Now().Unix()
	out, err := rt.Invoke(context.Background(), v, plugins.Call{Activity: "probe", Config: map[string]string{"greeting": "hej"}})
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Stdin   string   `json:"stdin"`
		Env     []string `json:"env"`
		Home    string   `json:"home"`
		Args    []string `json:"args"`
		NowUnix int64    `json:"now_unix"`
		SleptMS int64    `json:"slept_ms"`
		Random  bool     `json:"random"`
		Config  string   `json:"config"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	// The test process has HOME and PATH set; none of it may reach the guest.
	if len(p.Env) != 0 || p.Home != "" {
		t.Errorf("guest sees environment %q, HOME %q; want none", p.Env, p.Home)
	}
	if len(p.Args) != 0 {
		t.Errorf("guest sees arguments %q; want none", p.Args)
	}
	if p.Stdin != "0 EOF" {
		t.Errorf("stdin read gave %q, want 0 EOF", p.Stdin)
	}
	if p.NowUnix < before || p.NowUnix > time.Now().Unix() {
		t.Errorf("guest wall clock %d is not the real time", p.NowUnix)
	}
	if p.SleptMS < 20 {
		t.Errorf("a 20ms sleep took %dms: the monotonic clock or sleeping is fake", p.SleptMS)
	}
	if !p.Random {
		t.Error("random source gave zeros")
	}
	if p.Config != "hej" {
		t.Errorf("config greeting %q, want hej", p.Config)
	}
}

// recorder collects log records.
type recorder struct {
	mu   sync.Mutex
	recs []plugins.Record
}

func (r *recorder) log(rec plugins.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

func TestGuestLogsCapturedWithinVolumeLimit(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, plugins.Config{MaxLogBytes: 4096})
	v := loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/sandbox"))

	t.Run("small", func(t *testing.T) {
		t.Parallel()
		var rec recorder
		if _, err := rt.Invoke(context.Background(), v, plugins.Call{Activity: "noise", Input: []byte(`{"lines":2,"size":3}`), Log: rec.log}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rec.recs {
			got = append(got, r.Source+"/"+r.Level.String()+": "+r.Message)
		}
		want := []string{
			"log/INFO: log 0 xxx", "stdout/INFO: stdout 0 xxx", "stderr/WARN: stderr 0 xxx",
			"log/INFO: log 1 xxx", "stdout/INFO: stdout 1 xxx", "stderr/WARN: stderr 1 xxx",
			"stdout/INFO: unterminated",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("over the limit", func(t *testing.T) {
		t.Parallel()
		var rec recorder
		if _, err := rt.Invoke(context.Background(), v, plugins.Call{Activity: "noise", Input: []byte(`{"lines":100,"size":100}`), Log: rec.log}); err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, r := range rec.recs[:len(rec.recs)-1] {
			total += len(r.Message)
		}
		if total > 4096 {
			t.Errorf("%d bytes logged, more than the 4096 limit", total)
		}
		last := rec.recs[len(rec.recs)-1]
		if last.Level != slog.LevelWarn || !strings.Contains(last.Message, "log volume limit of 4096 bytes reached") {
			t.Errorf("last record %+v, want the dropped-bytes note", last)
		}
	})
}

func TestGuestExitDiscardsInstanceAndKeepsStderr(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, plugins.Config{PoolSize: 1, Logger: discardLogger()})
	v := loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/sandbox"))
	_, err := rt.Invoke(context.Background(), v, plugins.Call{Activity: "exit"})
	var ce *plugins.CallError
	if !errors.Is(err, plugins.ErrTrap) || !errors.As(err, &ce) {
		t.Fatalf("error %v, want ErrTrap", err)
	}
	if !strings.Contains(err.Error(), "exited with code 3") || !strings.Contains(ce.Stderr, "exiting with 3") {
		t.Errorf("error %q with stderr %q: want the exit code and the guest's stderr", err, ce.Stderr)
	}
	if _, err := rt.Invoke(context.Background(), v, plugins.Call{Activity: "noise", Input: []byte(`{}`)}); err != nil {
		t.Fatalf("call after exit: %v", err)
	}
}
