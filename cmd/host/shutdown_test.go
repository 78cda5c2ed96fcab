package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/testplugins"
)

// TestShutdownBoundedWithHostileGuests: SIGTERM to a host whose guests
// spin, sleep in a host call, flood their log or write for ever ends the
// process within http.shutdown_timeout (and a margin for a loaded
// machine), and what the shutdown cut off is not lost: the next start
// runs the interrupted instances again.
func TestShutdownBoundedWithHostileGuests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	t.Parallel()
	const shutdownTimeout = 3 * time.Second
	bin := buildWeft(t)
	data := t.TempDir()
	args := []string{"--data-dir", data, "--set", "plugins.cache_dir=" + testplugins.CacheDir(t),
		"--set", "http.shutdown_timeout=" + shutdownTimeout.String()}
	p := startProcess(t, bin, args...)
	go drain(p)
	c, err := client.New(client.Config{Server: "http://" + p.addr})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	fails := map[string]string{} // by instance: the code its attempt fails with
	for _, g := range hostileGuests {
		switch g.name {
		case "spin", "sleep", "iovecs", "recursion", "logflood":
		default:
			continue
		}
		if _, _, err := c.PutPlugin(ctx, g.name, testplugins.Guest{Extra: g.extra, Init: g.init, Body: g.body}.Module(t)); err != nil {
			t.Fatalf("upload %s: %v", g.name, err)
		}
		// Long enough that the shutdown, as a rule, comes first; one
		// attempt, so that an attempt the shutdown failed would show.
		wf := fmt.Sprintf("name: h-%s\nsteps: [ { id: s, activity: %s.go, timeout: 20s, retry: { max_attempts: 1 } } ]\n", g.name, g.name)
		if _, _, err := c.PutWorkflow(ctx, "h-"+g.name, []byte(wf)); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			inst, _, err := c.Start(ctx, "h-"+g.name, apiv1.StartRequest{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, inst.ID)
			fails[inst.ID] = g.fails
		}
	}
	for _, id := range ids {
		until(t, time.Minute, "instance "+id+" running", func() bool {
			i, err := c.Instance(ctx, id)
			// A guest that ends on its own (logflood) may be done already.
			return err == nil && (i.Status == apiv1.StatusRunning || i.Status.Terminal())
		})
	}

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exit:
	case <-time.After(shutdownTimeout + 10*time.Second):
		t.Fatalf("the host did not exit within %s of SIGTERM (shutdown timeout %s)", shutdownTimeout+10*time.Second, shutdownTimeout)
	}
	took := time.Since(start)
	t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
	if took > shutdownTimeout+5*time.Second {
		t.Errorf("the host took %s to exit after SIGTERM; its shutdown timeout is %s", took, shutdownTimeout)
	}

	// The next start runs them again: each ends as its policy says (the
	// timeout, or completed), not as the shutdown left it.
	p = startProcess(t, bin, args...)
	go drain(p)
	if c, err = client.New(client.Config{Server: "http://" + p.addr}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		var last *apiv1.Instance
		until(t, 2*time.Minute, "instance "+id+" finished after the restart", func() bool {
			i, err := c.Instance(ctx, id)
			last = i
			return err == nil && i.Status.Terminal()
		})
		switch want := fails[id]; {
		case want == "" && last.Status != apiv1.StatusCompleted,
			want != "" && (last.Status != apiv1.StatusFailed || last.Error == nil || last.Error.Code != want):
			t.Errorf("instance %s after the restart: %s %+v; want it run to its end (%q)", id, last.Status, last.Error, want)
		}
	}
}
