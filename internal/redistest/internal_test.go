package redistest

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fatalRecorder is a testing.TB whose Fatal ends only the calling
// goroutine and records the message, so that a test can check how Start
// fails.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestStartFailsClearly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []Option
		want string
	}{
		{"MissingBinary", []Option{func(c *config) { c.binary = filepath.Join(t.TempDir(), "redis-server") }},
			"install redis-server (make deps)"},
		{"BadFsync", []Option{WithAppendFsync("sometimes")}, `WithAppendFsync("sometimes")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &fatalRecorder{TB: t}
			done := make(chan *Server)
			go func() {
				defer close(done)
				done <- Start(rec, tt.opts...)
			}()
			if s, ok := <-done; ok {
				t.Fatalf("Start returned a server on %s", s.Addr())
			}
			if !strings.Contains(rec.msg, tt.want) {
				t.Errorf("Start failed with %q, want it to say %q", rec.msg, tt.want)
			}
		})
	}
}
