package plugintest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/sdk/plugintest"
)

// The tests run plugintest against the weft command of this repository,
// built from ../../cmd/host, and against its example plugins.

var repo = filepath.Join("..", "..")

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("WEFT") == "" {
		dir, err := os.MkdirTemp("", "plugintest-*")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "weft")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/host")
		cmd.Dir = repo
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building weft: %v\n%s", err, b)
			return 1
		}
		os.Setenv("WEFT", bin)
	}
	return m.Run()
}

func TestKit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds plugins and runs the weft command")
	}
	t.Parallel()
	p := plugintest.Build(t, filepath.Join(repo, "examples", "plugins", "kit"))

	t.Run("output", func(t *testing.T) {
		t.Parallel()
		var out struct{ Text string }
		p.Call(t, "upper", plugintest.Call{Input: map[string]string{"text": "hi"}}).Decode(t, &out)
		if out.Text != "HI" {
			t.Errorf("upper: %q, want HI", out.Text)
		}
		res := p.Call(t, "echo", plugintest.Call{Input: []byte(`{"a": [1, 2]}`)})
		if string(res.Output) != `{"a":[1,2]}` {
			// The host hands back the bytes the guest passed to result;
			// encoding/json compacted them on the way out of the command.
			t.Errorf("echo: %s", res.Output)
		}
	})

	t.Run("guest failure", func(t *testing.T) {
		t.Parallel()
		f := p.Call(t, "fail", plugintest.Call{Input: map[string]any{"code": "busy", "message": "later", "retryable": true}}).Failed(t)
		if f.Kind != "activity" || f.Code != "busy" || f.Message != "later" || !f.Retryable {
			t.Errorf("failure %+v, want the retryable activity failure busy: later", f)
		}
		f = p.Call(t, "fail", plugintest.Call{Input: map[string]any{"code": "bad", "fail_attempts": 1}}).Failed(t)
		if f.Code != "bad" || f.Retryable {
			t.Errorf("failure %+v, want the non-retryable bad", f)
		}
		var out struct{ Attempt int }
		p.Call(t, "fail", plugintest.Call{Input: map[string]any{"code": "bad", "fail_attempts": 1}, Attempt: 2}).Decode(t, &out)
		if out.Attempt != 2 {
			t.Errorf("attempt %d, want 2", out.Attempt)
		}
	})

	t.Run("host failures", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			activity  string
			call      plugintest.Call
			kind      string
			code      string
			retryable bool
		}{
			// The SDK reports a Go panic through the ABI.
			{activity: "trap", kind: "activity", code: "panic", retryable: true},
			{activity: "spin", call: plugintest.Call{Timeout: 300 * time.Millisecond}, kind: "timeout", code: "timeout", retryable: true},
			{activity: "nope", kind: "unknown_activity", code: "unknown_activity"},
		} {
			f := p.Call(t, tt.activity, tt.call).Failed(t)
			if f.Kind != tt.kind || f.Code != tt.code || f.Retryable != tt.retryable {
				t.Errorf("%s: failure %+v, want kind %s, code %s, retryable %t", tt.activity, f, tt.kind, tt.code, tt.retryable)
			}
		}
	})

	t.Run("heartbeats", func(t *testing.T) {
		t.Parallel()
		res := p.Call(t, "work", plugintest.Call{Input: map[string]int{"ms": 50, "beat_ms": 10}})
		var out struct {
			DoneMS int64 `json:"done_ms"`
		}
		res.Decode(t, &out)
		if len(res.Heartbeats) < 2 {
			t.Fatalf("%d heartbeats, want several", len(res.Heartbeats))
		}
		var last struct {
			DoneMS int64 `json:"done_ms"`
		}
		if err := json.Unmarshal(res.Heartbeats[len(res.Heartbeats)-1], &last); err != nil || last.DoneMS != 50 {
			t.Errorf("last heartbeat %s (%v), want done_ms 50", res.Heartbeats[len(res.Heartbeats)-1], err)
		}
	})

	t.Run("cancelled at a heartbeat", func(t *testing.T) {
		t.Parallel()
		res := p.Call(t, "work", plugintest.Call{Input: map[string]int{"ms": 60000, "beat_ms": 10}, CancelAtHeartbeat: 3})
		f := res.Failed(t)
		if f.Kind != "cancelled" || f.Retryable {
			t.Errorf("failure %+v, want cancelled", f)
		}
		if len(res.Heartbeats) != 3 {
			t.Errorf("%d heartbeats, want the guest to stop at the third", len(res.Heartbeats))
		}
	})

	t.Run("resumes from the last heartbeat", func(t *testing.T) {
		t.Parallel()
		var out struct {
			ResumedFrom int64 `json:"resumed_from"`
			Attempt     int   `json:"attempt"`
		}
		p.Call(t, "work", plugintest.Call{
			Input:         map[string]int{"ms": 40, "beat_ms": 10},
			Attempt:       2,
			LastHeartbeat: map[string]int{"done_ms": 30},
		}).Decode(t, &out)
		if out.ResumedFrom != 30 || out.Attempt != 2 {
			t.Errorf("output %+v, want resumed_from 30 on attempt 2", out)
		}
	})
}

func TestWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds plugins and runs the weft command")
	}
	t.Parallel()
	p := plugintest.Build(t, filepath.Join(repo, "examples", "plugins", "webhook"))
	const token = "s3cret-token"
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("Authorization") + " " + string(body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok": true}`)
	}))
	defer srv.Close()

	res := p.Call(t, "deliver", plugintest.Call{
		Input:           map[string]string{"event": "signed"},
		Config:          map[string]string{"url": srv.URL + "/hook"},
		Secrets:         map[string]string{"token": token},
		Hosts:           []string{srv.URL}, // http://127.0.0.1:PORT: a pattern without a scheme is https
		PrivateNetworks: true,
	})
	var out struct{ Status int }
	res.Decode(t, &out)
	if out.Status != 200 {
		t.Errorf("status %d, want 200", out.Status)
	}
	if g := <-got; g != `Bearer `+token+` {"event":"signed"}` {
		t.Errorf("the server got %q", g)
	}
	if len(res.Requests) != 1 || res.Requests[0].Method != "POST" || res.Requests[0].Path != "/hook" || res.Requests[0].Status != 200 {
		t.Errorf("requests %+v, want one POST /hook answered 200", res.Requests)
	}

	// Without the host granted, the request is refused, and says so.
	f := p.Call(t, "deliver", plugintest.Call{
		Input:   map[string]string{"event": "signed"},
		Config:  map[string]string{"url": srv.URL + "/hook"},
		Secrets: map[string]string{"token": token},
	}).Failed(t)
	if f.Kind != "not_granted" || f.Retryable {
		t.Errorf("failure %+v, want not_granted", f)
	}
	if strings.Contains(f.Message, token) {
		t.Errorf("the failure shows the secret: %s", f.Message)
	}
}
