package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/metrics"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/store/redisstore"
)

// The engine's optional interfaces of its store (internal/engine), which
// the decorator must keep.
type (
	barrierer interface {
		BarrierOf(ctx context.Context, id string) error
	}
	striper interface{ SweepStripes() []store.Store }
)

var camel = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// operation is the label value of a Store method: its name in snake case.
func operation(method string) string {
	return strings.ToLower(camel.ReplaceAllString(method, "${1}_${2}"))
}

// callEveryMethod calls each method of store.Store on s with zero
// arguments, and returns the operations called.
func callEveryMethod(s store.Store) []string {
	typ := reflect.TypeFor[store.Store]()
	v := reflect.ValueOf(s)
	var ops []string
	for i := range typ.NumMethod() {
		meth := typ.Method(i)
		args := make([]reflect.Value, meth.Type.NumIn())
		for j := range args {
			args[j] = reflect.Zero(meth.Type.In(j))
		}
		if meth.Type.NumIn() > 0 && meth.Type.In(0) == reflect.TypeFor[context.Context]() {
			args[0] = reflect.ValueOf(context.Background())
		}
		v.MethodByName(meth.Name).Call(args)
		ops = append(ops, operation(meth.Name))
	}
	return ops
}

// TestInstrumentStoreTimesEveryMethod: every method of store.Store is
// timed under its own operation, failures are counted, and refusals and
// cancellations are not.
func TestInstrumentStoreTimesEveryMethod(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	inner := &failingStore{err: errors.New("redis 127.0.0.1:1: connection refused")}
	s := metrics.InstrumentStore(inner, m)
	if _, ok := s.(barrierer); ok {
		t.Error("the decorated store has BarrierOf, which its inner store has not")
	}
	if _, ok := s.(striper); ok {
		t.Error("the decorated store has SweepStripes, which its inner store has not")
	}
	// Every operation's error series exists before any error.
	for i := range reflect.TypeFor[store.Store]().NumMethod() {
		op := operation(reflect.TypeFor[store.Store]().Method(i).Name)
		if v := value(t, reg, "weft_store_operation_errors_total", "operation", op); v != 0 {
			t.Fatalf("errors{operation=%s} before any call = %v", op, v)
		}
	}
	ops := callEveryMethod(s)
	if len(ops) < 60 {
		t.Fatalf("called %d methods; store.Store has more", len(ops))
	}
	for _, op := range ops {
		if v := value(t, reg, "weft_store_operation_duration_seconds", "operation", op); v != 1 {
			t.Errorf("duration samples{operation=%s} = %v, want 1", op, v)
		}
		if v := value(t, reg, "weft_store_operation_errors_total", "operation", op); v != 1 {
			t.Errorf("errors{operation=%s} = %v, want 1", op, v)
		}
	}

	for _, c := range []struct {
		err     error
		counted bool
	}{
		{&store.CommitError{InstanceID: "a", Err: weft.ErrConflict}, false},
		{&store.CommitError{InstanceID: "a", Err: weft.ErrFenced}, false},
		{store.NotFound("instance %q", "a"), false},
		{fmt.Errorf("store: %w", store.ErrCatalogChanged), false},
		{store.Invalid("bad commit"), false},
		{context.Canceled, false},
		{nil, false},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("store: %w (%w)", store.ErrNotDurable, weft.ErrUnavailable), true},
		{weft.ErrClosed, true},
	} {
		inner.err = c.err
		before := value(t, reg, "weft_store_operation_errors_total", "operation", "commit")
		_, _ = s.Commit(t.Context(), store.Commit{})
		if got := value(t, reg, "weft_store_operation_errors_total", "operation", "commit") - before; got != map[bool]float64{true: 1}[c.counted] {
			t.Errorf("commit returning %v: errors counted %v, want counted=%v", c.err, got, c.counted)
		}
	}
}

// TestInstrumentStoreEmbedded: the embedded store through the decorator:
// real operations are timed, and it gains no optional interface.
func TestInstrumentStoreEmbedded(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	bs, err := embedded.Open(filepath.Join(t.TempDir(), "store"), embedded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := metrics.InstrumentStore(bs, m)
	t.Cleanup(func() { _ = s.Close() })
	if _, ok := s.(barrierer); ok {
		t.Error("the decorated embedded store has BarrierOf")
	}
	if _, ok := s.(striper); ok {
		t.Error("the decorated embedded store has SweepStripes")
	}
	ctx := t.Context()
	if _, err := s.EnqueueStimulus(ctx, weft.Stimulus{ID: "s1", Name: "paid", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetInstance(ctx, "nope"); !errors.Is(err, weft.ErrNotFound) {
		t.Fatalf("GetInstance of no instance: %v", err)
	}
	for _, c := range []struct {
		family, op string
		want       float64
	}{
		{"weft_store_operation_duration_seconds", "enqueue_stimulus", 1},
		{"weft_store_operation_duration_seconds", "get_instance", 1},
		{"weft_store_operation_errors_total", "get_instance", 0},
		{"weft_store_operation_errors_total", "enqueue_stimulus", 0},
	} {
		if v := value(t, reg, c.family, "operation", c.op); v != c.want {
			t.Errorf("%s{operation=%s} = %v, want %v", c.family, c.op, v, c.want)
		}
	}
}

// TestInstrumentStoreKeepsOptionalInterfaces: on real Redis stores, the
// decorator keeps BarrierOf (redisstore) and SweepStripes
// (redisstore.Partitioned), times them, and decorates the stripes.
func TestInstrumentStoreKeepsOptionalInterfaces(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := t.Context()

	t.Run("single", func(t *testing.T) {
		m, reg := newMetrics(t)
		rs, err := redisstore.Open(ctx, redisstore.Config{Client: srv.Client(t), Prefix: "single:"})
		if err != nil {
			t.Fatalf("opening the store on redis %s: %v", srv.Addr(), err)
		}
		s := metrics.InstrumentStore(rs, m)
		t.Cleanup(func() { _ = s.Close() })
		b, ok := s.(barrierer)
		if !ok {
			t.Fatal("the decorated redis store lost BarrierOf")
		}
		if _, ok := s.(striper); ok {
			t.Error("the decorated redis store (one partition) has SweepStripes")
		}
		if err := b.BarrierOf(ctx, "a"); err != nil {
			t.Fatalf("BarrierOf: %v", err)
		}
		if v := value(t, reg, "weft_store_operation_duration_seconds", "operation", "barrier_of"); v != 1 {
			t.Errorf("barrier_of samples = %v, want 1", v)
		}
	})

	t.Run("partitioned", func(t *testing.T) {
		m, reg := newMetrics(t)
		ps, err := redisstore.OpenPartitioned(ctx, redisstore.PartitionedConfig{
			Config: redisstore.Config{Client: srv.Client(t), Prefix: "parts:"}, Partitions: 2, RelayInterval: time.Hour,
		})
		if err != nil {
			t.Fatalf("opening the partitioned store on redis %s: %v", srv.Addr(), err)
		}
		s := metrics.InstrumentStore(ps, m)
		t.Cleanup(func() { _ = s.Close() })
		if _, ok := s.(barrierer); !ok {
			t.Error("the decorated partitioned store lost BarrierOf")
		}
		l, ok := s.(striper)
		if !ok {
			t.Fatal("the decorated partitioned store lost SweepStripes")
		}
		stripes := l.SweepStripes()
		if want := len(ps.SweepStripes()); len(stripes) != want || want < 2 {
			t.Fatalf("decorated SweepStripes = %d stripes, the store's %d", len(stripes), want)
		}
		for i, stripe := range stripes {
			if _, err := stripe.DueTimers(ctx, time.Now(), 10); err != nil {
				t.Fatalf("stripe %d: DueTimers: %v", i, err)
			}
		}
		if v := value(t, reg, "weft_store_operation_duration_seconds", "operation", "due_timers"); v != float64(len(stripes)) {
			t.Errorf("due_timers samples = %v, want one per stripe (%d)", v, len(stripes))
		}
	})
}

// BenchmarkInstrumentStore is the decorator's cost per call.
func BenchmarkInstrumentStore(b *testing.B) {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	s := metrics.InstrumentStore(&failingStore{}, m)
	ctx := context.Background()
	for b.Loop() {
		_, _ = s.GetInstance(ctx, "a")
	}
}
