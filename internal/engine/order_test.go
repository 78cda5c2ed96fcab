package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/queue"
)

// pushLog is a queue that records what is pushed to it.
type pushLog struct {
	queue.Queue
	mu    sync.Mutex
	items []queue.Item
}

func (l *pushLog) Push(ctx context.Context, it queue.Item) error {
	l.mu.Lock()
	l.items = append(l.items, it)
	l.mu.Unlock()
	return l.Queue.Push(ctx, it)
}

// of returns the items pushed for instance id with reason, in order.
func (l *pushLog) of(id, reason string) []queue.Item {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []queue.Item
	for _, it := range l.items {
		if it.InstanceID == id && it.Reason == reason {
			out = append(out, it)
		}
	}
	return out
}

const orderFlows = `
name: plain
steps:
  - { id: done, set: { ok: true } }
---
name: tiered
priority: "${ input.p }"
fairness: { key: "${ input.tenant }", weight: 2 }
steps:
  - { id: nap, delay: 50ms }
  - { id: sub, workflow: plain }
`

// TestOrderIsCarriedToTheQueue: an instance's order, decided at create
// from its definition (or its start, or its parent), goes with every item
// the engine queues for it: its start, its due timer, its child's start,
// and its wake-up when the child ends.
func TestOrderIsCarriedToTheQueue(t *testing.T) {
	log := &pushLog{}
	h := newHost(t, func(p *hostParts) {
		p.wrapQueue = func(q queue.Queue) queue.Queue { log.Queue = q; return log }
	})
	for _, src := range strings.Split(orderFlows, "---\n") {
		h.save(src)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func(id string, input string, priority int) (*weft.Instance, error) {
		inst, _, w, err := h.e.StartWatched(ctx, "tiered", json.RawMessage(input), weft.StartOptions{ID: id, Priority: priority})
		if w != nil {
			w.Stop()
		}
		return inst, err
	}
	for _, tt := range []struct {
		id, input string
		priority  int
		want      weft.Order
	}{
		{"from-input", `{"p": 1, "tenant": "acme"}`, 0, weft.Order{Priority: 1, FairnessKey: "acme", FairnessWeight: 2}},
		{"start-wins", `{"p": 5, "tenant": "acme"}`, 2, weft.Order{Priority: 2, FairnessKey: "acme", FairnessWeight: 2}},
		{"defaults", `{}`, 0, weft.Order{Priority: weft.DefaultPriority, FairnessWeight: 2}},
		// The definition's priority is not evaluated: its 9 refuses nothing.
		{"start-chooses", `{"p": 9, "tenant": "acme"}`, 4, weft.Order{Priority: 4, FairnessKey: "acme", FairnessWeight: 2}},
	} {
		t.Run(tt.id, func(t *testing.T) {
			inst, err := start(tt.id, tt.input, tt.priority)
			if err != nil {
				t.Fatal(err)
			}
			if inst.Order != tt.want {
				t.Errorf("the instance's order is %+v, want %+v", inst.Order, tt.want)
			}
			got, err := h.e.WaitFinished(ctx, tt.id)
			if err != nil || got.Status != weft.StatusCompleted {
				t.Fatalf("WaitFinished = %v, %v; want completed", got, err)
			}
			if got.Order != tt.want {
				t.Errorf("the stored instance's order is %+v, want %+v", got.Order, tt.want)
			}
			want := queue.Item{InstanceID: tt.id, Priority: tt.want.Priority, Key: tt.want.FairnessKey, Weight: tt.want.FairnessWeight}
			for _, reason := range []string{"start", "timer", "child"} {
				items := log.of(tt.id, reason)
				if len(items) == 0 {
					t.Errorf("no %s item was queued", reason)
				}
				for _, it := range items {
					it.Reason = ""
					if it != want {
						t.Errorf("%s item %+v, want %+v", reason, it, want)
					}
				}
			}
			kids, _, err := h.store.ListInstances(ctx, weft.InstanceFilter{Workflow: "plain", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, k := range kids {
				if k.Parent == nil || k.Parent.InstanceID != tt.id {
					continue
				}
				found = true
				if k.Order != tt.want {
					t.Errorf("the child's order is %+v, want its parent's %+v", k.Order, tt.want)
				}
				for _, it := range log.of(k.ID, "start") {
					if it.Priority != tt.want.Priority || it.Key != tt.want.FairnessKey || it.Weight != tt.want.FairnessWeight {
						t.Errorf("the child's start item %+v, want its parent's order %+v", it, tt.want)
					}
				}
			}
			if !found {
				t.Errorf("no child of %s", tt.id)
			}
		})
	}
	for _, tt := range []struct {
		name, input string
		priority    int
		want        string
	}{
		{"priority out of range", `{"p": 9}`, 0, `priority: expression "${ input.p }": got 9, want an integer from 1 to 5`},
		{"a start's priority out of range", `{"p": 1}`, 6, "priority 6 is not from 1 (first) to 5 (last)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := start("", tt.input, tt.priority)
			if !errors.Is(err, weft.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start = %v, want weft.ErrInvalid saying %q", err, tt.want)
			}
		})
	}
	t.Run("a workflow without an order queues in the default one", func(t *testing.T) {
		inst, _, err := h.e.Start(ctx, "plain", nil, "plain-1")
		if err != nil {
			t.Fatal(err)
		}
		if inst.Order != (weft.Order{}) {
			t.Errorf("order %+v, want none", inst.Order)
		}
		for _, it := range log.of("plain-1", "start") {
			if it.Priority != 0 || it.Key != "" || it.Weight != 0 {
				t.Errorf("start item %+v, want the default order", it)
			}
		}
	})
}

// TestOrderOfEventsAndSchedules: an event's priority goes to the
// instances its triggers start, and a schedule's to its runs, before
// their definitions' priority.
func TestOrderOfEventsAndSchedules(t *testing.T) {
	h := newHost(t)
	h.save("name: on-order\ntriggers: [ { event: order.created } ]\npriority: 4\nfairness: { key: \"${ input.shop }\" }\nsteps: [ { id: done, set: { ok: true } } ]\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	out, err := h.e.Signal(ctx, weft.Event{ID: "e1", Name: "order.created", Payload: map[string]any{"shop": "s1"}, Priority: 1})
	if err != nil || len(out.Started) != 1 {
		t.Fatalf("Signal = %+v, %v; want one instance started", out, err)
	}
	inst, err := h.e.WaitFinished(ctx, out.Started[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := (weft.Order{Priority: 1, FairnessKey: "s1", FairnessWeight: 1}); inst.Order != want {
		t.Errorf("the triggered instance's order is %+v, want %+v", inst.Order, want)
	}
	if _, err := h.e.Signal(ctx, weft.Event{ID: "e2", Name: "order.created", Priority: 7}); !errors.Is(err, weft.ErrInvalid) {
		t.Errorf("Signal with priority 7 = %v, want weft.ErrInvalid", err)
	}

	doc := "id: hourly\nworkflow: on-order\npriority: 2\ninput: { shop: s2 }\nspec: { every: 1h }\n"
	if _, _, _, err := h.e.SaveSchedule(ctx, []byte(doc), "", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.TriggerSchedule(ctx, "hourly", "", "test"); err != nil {
		t.Fatal(err)
	}
	var run *weft.Instance
	for run == nil {
		list, _, err := h.store.ListInstances(ctx, weft.InstanceFilter{Workflow: "on-order", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list {
			if list[i].Order.FairnessKey == "s2" {
				run = &list[i]
			}
		}
		if run == nil {
			select {
			case <-ctx.Done():
				t.Fatal("the schedule's triggered run did not start")
			case <-time.After(20 * time.Millisecond): // polling with the deadline above
			}
		}
	}
	if want := (weft.Order{Priority: 2, FairnessKey: "s2", FairnessWeight: 1}); run.Order != want {
		t.Errorf("the schedule's run's order is %+v, want %+v", run.Order, want)
	}
}
