package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/testplugins"
)

const resumeID = "long-1"

// resumeHost runs an engine on dir (see TestMain). In "start" mode it
// starts one long kit.work instance under lazy persistence; in both modes
// it prints "beat N" whenever the details the store holds for the
// instance's attempt change (N is their done_ms), and runs until the
// instance has finished.
func resumeHost(dir, mode, kitPath, cache string) error {
	ctx := context.Background()
	h, err := openChildHost(dir, mode, kitPath, cache, `
name: longwork
steps:
  - { id: long, activity: kit.work, input: { ms: 2000, beat_ms: 20 }, heartbeat_timeout: 5s, timeout: 1m, output: long }
`)
	if err != nil {
		return err
	}
	defer h.close()
	st := h.st
	if mode == "start" {
		if _, _, err := h.e.Start(ctx, "longwork", nil, resumeID); err != nil {
			return err
		}
	}
	last := ""
	for {
		inst, err := st.GetInstance(ctx, resumeID)
		if err != nil {
			return err
		}
		if inst.Status.Terminal() {
			fmt.Println("finished", inst.Status)
			return nil
		}
		beats, err := st.Heartbeats(ctx, resumeID)
		if err != nil {
			return err
		}
		if len(beats) > 0 && string(beats[len(beats)-1].Details) != last {
			last = string(beats[len(beats)-1].Details)
			var p struct {
				DoneMS int64 `json:"done_ms"`
			}
			_ = json.Unmarshal(beats[len(beats)-1].Details, &p)
			fmt.Printf("beat %d\n", p.DoneMS)
		}
		time.Sleep(5 * time.Millisecond) // the child polls its own store
	}
}

// A host killed with SIGKILL in the middle of a long activity: another
// host takes the instance over once its lease expired and runs the
// activity again as attempt 2, which resumes from the details the first
// attempt's guest reported and the heartbeat scheduler persisted — under
// lazy persistence, where nothing else was written while it ran.
func TestKilledHostsAttemptResumesFromPersistedDetails(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts host processes")
	}
	kit := testplugins.Path(t, "kit")
	cache := testplugins.CacheDir(t)
	dir := t.TempDir()
	host := func(mode string) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "WEFT_RESUME_DIR="+dir, "WEFT_CRASH_MODE="+mode, "WEFT_CRASH_KIT="+kit, "WEFT_CRASH_CACHE="+cache)
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

	first, lines := host("start")
	var seen int64 = -1
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "error:") || strings.HasPrefix(line, "finished") {
			t.Fatalf("first host: %s", line)
		}
		if _, err := fmt.Sscanf(line, "beat %d", &seen); err == nil && seen >= 300 {
			if err := first.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	_ = first.Wait()
	if seen < 300 {
		t.Fatalf("the first host persisted no details past 300ms of work (last %d)", seen)
	}

	second, lines := host("recover")
	for lines.Scan() {
		if line := lines.Text(); strings.HasPrefix(line, "error:") {
			t.Fatalf("second host: %s", line)
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
	inst, err := st.GetInstance(ctx, resumeID)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != weft.StatusCompleted {
		t.Fatalf("instance %s: %+v", inst.Status, inst.Error)
	}
	var out struct {
		Long struct {
			DoneMS      int64 `json:"done_ms"`
			ResumedFrom int64 `json:"resumed_from"`
			Attempt     int   `json:"attempt"`
		} `json:"long"`
	}
	if err := json.Unmarshal(inst.Vars, &out); err != nil {
		t.Fatalf("vars %s: %v", inst.Vars, err)
	}
	// The store may have received later details than the last the parent
	// read before the kill, never earlier ones.
	if out.Long.Attempt != 2 || out.Long.ResumedFrom < seen || out.Long.DoneMS != 2000 {
		t.Fatalf("activity result %+v; want attempt 2 resumed from at least %d ms, done 2000", out.Long, seen)
	}
	evs, err := st.History(ctx, resumeID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var abandoned *weft.HistoryEntry
	for i, e := range evs {
		if e.Type == "attempt_abandoned" {
			abandoned = &evs[i]
		}
	}
	if abandoned == nil || abandoned.Node != "host-recover" {
		t.Fatalf("history has no attempt_abandoned by the second host: %+v", evs)
	}
	var data struct {
		LastHeartbeat struct {
			DoneMS int64 `json:"done_ms"`
		} `json:"last_heartbeat"`
	}
	if err := json.Unmarshal(abandoned.Data, &data); err != nil || data.LastHeartbeat.DoneMS != out.Long.ResumedFrom {
		t.Errorf("attempt_abandoned data %s; want last_heartbeat.done_ms = %d", abandoned.Data, out.Long.ResumedFrom)
	}
	t.Logf("killed after %d ms persisted; attempt 2 resumed from %d ms", seen, out.Long.ResumedFrom)
}
