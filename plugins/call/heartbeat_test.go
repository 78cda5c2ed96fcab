package call_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/plugins/call"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestHeartbeatRecordsTheLatestDetails(t *testing.T) {
	t.Parallel()
	hb := call.NewHeartbeat(t0)
	if details, at, beats := hb.Last(); details != nil || !at.Equal(t0) || beats != 0 {
		t.Fatalf("before a beat: %s, %s, %d; want nil, the start, 0", details, at, beats)
	}
	// The guest starts a second later: that is its last sign of life.
	hb.Restart(t0.Add(time.Second))
	hb.Restart(t0) // never backwards
	if _, at, _ := hb.Last(); !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("after Restart: %s, want the start of the guest", at)
	}
	buf := []byte(`{"done":1}`)
	hb.Beat(buf, t0.Add(2*time.Second))
	copy(buf, `{"done":9}`) // the guest's memory changes; the record does not
	hb.Beat(nil, t0.Add(3*time.Second))
	details, at, beats := hb.Last()
	if string(details) != `{"done":1}` || !at.Equal(t0.Add(3*time.Second)) || beats != 2 {
		t.Fatalf("after two beats: %s, %s, %d; want the first's details, the second's time, 2", details, at, beats)
	}
	details[2] = 'X' // Last returns a copy
	if again, _, _ := hb.Last(); string(again) != `{"done":1}` {
		t.Errorf("Last handed out its own details: %s", again)
	}
}

func TestHeartbeatCancellation(t *testing.T) {
	t.Parallel()
	hb := call.NewHeartbeat(t0)
	var stops atomic.Int32
	stop := hb.Watch(func() { stops.Add(1) })
	if hb.Beat(nil, t0) || hb.CancelRequested() {
		t.Fatal("cancelled before anyone asked")
	}
	hb.RequestCancel()
	hb.RequestCancel() // once is enough
	if !hb.CancelRequested() || stops.Load() != 1 {
		t.Fatalf("after RequestCancel: requested %v, the watcher ran %d times; want true, once", hb.CancelRequested(), stops.Load())
	}
	if !hb.Beat(nil, t0) {
		t.Error("the guest's next heartbeat was not told to stop")
	}
	stop()
	// A watch that starts after the request runs at once.
	late := false
	hb.Watch(func() { late = true })()
	if !late {
		t.Error("a watch after the request did not run")
	}
	// A stopped watch does not run.
	hb2 := call.NewHeartbeat(t0)
	hb2.Watch(func() { t.Error("a stopped watch ran") })()
	hb2.RequestCancel()
}

func TestHeartbeatOnBeatAnswersTheBeat(t *testing.T) {
	t.Parallel()
	hb := call.NewHeartbeat(t0)
	var seen []string
	hb.OnBeat(func(details []byte, n uint64) {
		seen = append(seen, string(details))
		if n == 2 {
			hb.RequestCancel() // from the callback, on the guest's goroutine
		}
	})
	if hb.Beat([]byte(`1`), t0) {
		t.Fatal("the first beat was cancelled")
	}
	if !hb.Beat(nil, t0) {
		t.Fatal("the cancellation OnBeat requested at the second beat was not its answer")
	}
	if len(seen) != 2 || seen[0] != "1" || seen[1] != "" {
		t.Errorf("OnBeat saw %q, want the details of each beat", seen)
	}
}

func TestHeartbeatHostWaitIsASignOfLife(t *testing.T) {
	t.Parallel()
	hb := call.NewHeartbeat(t0)
	var now atomic.Int64
	now.Store(t0.Add(time.Minute).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	end := hb.HostWait(clock)
	// While the host waits on the world the guest cannot beat: it is alive.
	now.Store(t0.Add(time.Hour).UnixNano())
	if _, at, _ := hb.Last(); !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("during a host wait: %s, want the clock's now", at)
	}
	end()
	now.Store(t0.Add(2 * time.Hour).UnixNano())
	if _, at, _ := hb.Last(); !at.Equal(t0.Add(time.Hour)) {
		t.Errorf("after the wait: %s, want its end", at)
	}
}

// TestHeartbeatHammer: the guest beats while the scheduler reads and
// another goroutine cancels; run with -race.
func TestHeartbeatHammer(t *testing.T) {
	t.Parallel()
	const goroutines, loops = 4, 1000
	hb := call.NewHeartbeat(t0)
	var watched atomic.Int32
	defer hb.Watch(func() { watched.Add(1) })()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(3)
		go func() {
			defer wg.Done()
			for i := range loops {
				hb.Beat([]byte{'0' + byte(i%10)}, t0.Add(time.Duration(i)))
			}
		}()
		go func() {
			defer wg.Done()
			for range loops {
				hb.Last()
				hb.CancelRequested()
			}
		}()
		go func() {
			defer wg.Done()
			for i := range loops {
				if g == 0 && i == loops/2 {
					hb.RequestCancel()
				}
				hb.HostWait(func() time.Time { return t0 })()
			}
		}()
	}
	wg.Wait()
	if _, _, beats := hb.Last(); beats != goroutines*loops || !hb.CancelRequested() || watched.Load() != 1 {
		t.Errorf("%d beats, cancelled %v, watcher ran %d times; want %d, true, once", beats, hb.CancelRequested(), watched.Load(), goroutines*loops)
	}
}
