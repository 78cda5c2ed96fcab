package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
)

func TestPluginCommands(t *testing.T) {
	t.Parallel()
	kit := testplugins.Path(t, "kit")
	junk := filepath.Join(t.TempDir(), "junk.wasm")
	if err := os.WriteFile(junk, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(input, []byte(`{"text":"from a file"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "check", args: []string{"plugin", "check", kit}, wantCode: exitOK, wantStdout: "work"},
		{name: "check junk", args: []string{"plugin", "check", junk}, wantCode: exitFailed, wantStderr: "not a valid WebAssembly module"},
		{name: "check missing file", args: []string{"plugin", "check", "/nonexistent.wasm"}, wantCode: exitUsage, wantStderr: "no such file"},
		{name: "call", args: []string{"plugin", "call", kit, "upper", "-input", `{"text":"hi"}`}, wantCode: exitOK, wantStdout: `{"text":"HI"}`},
		{name: "call input file", args: []string{"plugin", "call", kit, "upper", "-input", "@" + input}, wantCode: exitOK, wantStdout: `{"text":"FROM A FILE"}`},
		{name: "call info", args: []string{"plugin", "call", kit, "info", "-attempt", "3"}, wantCode: exitOK, wantStdout: `"attempt":3`},
		{name: "call resumes", args: []string{"plugin", "call", kit, "work", "-input", `{"ms":30,"beat_ms":5}`, "-last-heartbeat", `{"done_ms":20}`}, wantCode: exitOK, wantStdout: `"resumed_from":20`, wantStderr: "heartbeats:"},
		{name: "call failing", args: []string{"plugin", "call", kit, "fail", "-input", `{"code":"nope"}`}, wantCode: exitFailed, wantStderr: "activity failed: nope"},
		{name: "call timeout", args: []string{"plugin", "call", kit, "spin", "-timeout", "100ms"}, wantCode: exitFailed, wantStderr: "deadline exceeded"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: exitUsage, wantStderr: "usage:"},
		{name: "help", args: []string{"help"}, wantCode: exitOK, wantStdout: "weft run WORKFLOW"},
		{name: "unknown subcommand", args: []string{"plugin", "frobnicate"}, wantCode: exitUsage, wantStderr: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, now: time.Now}
			code := a.run(context.Background(), tt.args)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, &stdout, &stderr)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", &stdout, tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", &stderr, tt.wantStderr)
			}
		})
	}
}
