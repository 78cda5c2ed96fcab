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

func TestObserverSeesStatusesAndStepLatencies(t *testing.T) {
	t.Parallel()
	o := &observed{status: map[string][]weft.Status{}, slow: map[string]time.Duration{}}
	// No renewal cycle within the test: an attempt that outlives one is
	// committed running to get a lease (heartbeat.go), which a loaded
	// machine's slow attempt would, against the lazy strategy's "no
	// running commit" that the test checks. The locks outlive the test too.
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
	if got, want := o.status["bad"], []weft.Status{weft.StatusPending, weft.StatusFailed}; !slices.Equal(got, want) {
		t.Errorf("bad's statuses %v, want %v (lazy persistence: no running commit)", got, want)
	}
	if want := []string{"good/nap completed", "good/shout completed", "bad/charge failed"}; !slices.Equal(o.steps, want) {
		t.Errorf("steps %v, want %v", o.steps, want)
	}
	if d := o.slow["nap"]; d < 50*time.Millisecond || d > 20*time.Second {
		t.Errorf("nap's latency %s, want at least the 50ms it worked", d)
	}
}
