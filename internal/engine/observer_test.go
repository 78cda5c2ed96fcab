package engine_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
)

// observed records what an engine.Observer is told.
type observed struct {
	mu     sync.Mutex
	status map[string][]weft.Status // by workflow
	steps  []string                 // "workflow/step outcome"
	slow   map[string]time.Duration // longest latency by step
}

func (o *observed) InstanceStatus(workflow string, s weft.Status) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.status[workflow] = append(o.status[workflow], s)
}

func (o *observed) StepFinished(workflow, step, outcome string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.steps = append(o.steps, fmt.Sprintf("%s/%s %s", workflow, step, outcome))
	o.slow[step] = max(o.slow[step], d)
}

func (o *observed) InstancesDeleted(reason string, n int)                       {}
func (o *observed) ScheduleFired(kind string, started bool, late time.Duration) {}
func (o *observed) SchedulesSkipped(reason string, n int)                       {}
func (o *observed) SlotWaited(workflow string, d time.Duration)                 {}
func (o *observed) SlotCancelled(workflow, policy string)                       {}
func (o *observed) BatchApplied(string, string, int)                            {}
func (o *observed) InstanceFinished(string, weft.Status, time.Duration)         {}
func (o *observed) TimerFired(time.Duration)                                    {}
func (o *observed) InstanceTakenOver()                                          {}
func (o *observed) AttemptAbandoned(string)                                     {}

func TestObserverSeesStatusesAndStepLatencies(t *testing.T) {
	t.Parallel()
	o := &observed{status: map[string][]weft.Status{}, slow: map[string]time.Duration{}}
	// A long renewal cycle, and locks that outlive the test.
	h := newHost(t, withConfig(engine.Config{
		NodeID: "n1", TimerInterval: 10 * time.Millisecond, Observer: o,
		LockTTL: 10 * time.Minute, Heartbeat: heartbeat.Config{Cycle: 2 * time.Minute},
	}))
	h.save(`
name: good
persistence: activity
steps:
  - { id: nap, activity: kit.work, input: { ms: 50 } }
  - { id: shout, activity: kit.upper, input: { text: hi } }
`)
	h.save(`
name: bad
steps:
  - { id: charge, activity: kit.fail, input: { code: card_declined } }
`)
	if inst := h.finish("good", nil); inst.Status != weft.StatusCompleted {
		t.Fatalf("good: %s %+v", inst.Status, inst.Error)
	}
	if inst := h.finish("bad", nil); inst.Status != weft.StatusFailed {
		t.Fatalf("bad: %s", inst.Status)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if got, want := o.status["good"], []weft.Status{weft.StatusPending, weft.StatusRunning, weft.StatusCompleted}; !slices.Equal(got, want) {
		t.Errorf("good's statuses %v, want %v", got, want)
	}
	// Lazy persistence commits bad only when it fails, unless the heartbeat
	// scheduler visits its attempt first (it may, anywhere in its first
	// cycle, and a starved process's overrun visits at once): then it is
	// committed running to get a lease. Either is right.
	if got := o.status["bad"]; !slices.Equal(got, []weft.Status{weft.StatusPending, weft.StatusFailed}) &&
		!slices.Equal(got, []weft.Status{weft.StatusPending, weft.StatusRunning, weft.StatusFailed}) {
		t.Errorf("bad's statuses %v, want pending, (running,) failed", got)
	}
	if want := []string{"good/nap completed", "good/shout completed", "bad/charge failed"}; !slices.Equal(o.steps, want) {
		t.Errorf("steps %v, want %v", o.steps, want)
	}
	if d := o.slow["nap"]; d < 50*time.Millisecond || d > 20*time.Second {
		t.Errorf("nap's latency %s, want at least the 50ms it worked", d)
	}
}
