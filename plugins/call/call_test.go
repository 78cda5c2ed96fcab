package call_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins/call"
)

func TestLogToNamesTheAttempt(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := call.Call{Activity: "resize", Info: abi.Info{Plugin: "thumbnail", InstanceID: "i1", StepID: "s1", Attempt: 3}}
	rec := call.Record{Level: slog.LevelWarn, Source: "stderr", Message: "low memory"}
	c.LogTo(log, rec)
	got := buf.String()
	for _, want := range []string{"level=WARN", `msg="plugin: low memory"`, "source=stderr", "plugin=thumbnail", "activity=resize", "instance=i1", "step=s1", "attempt=3"} {
		if !strings.Contains(got, want) {
			t.Errorf("LogTo wrote %q, without %s", got, want)
		}
	}
	if rec.LevelName() != "warn" {
		t.Errorf("LevelName() = %q, want warn", rec.LevelName())
	}
}
