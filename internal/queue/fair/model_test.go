package fair_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/queue/fair"
)

// model is the order as the package doc states it, written to be read
// rather than to be fast: every queued entry in one slice in push order,
// the rings as slices of keys, everything found by scanning. The Redis
// queue's Lua is held to fair.Order, and fair.Order is held to this.
type model struct {
	entries []fair.Entry                      // push order
	ring    [weft.LowestPriority + 1][]string // by priority; the head first
	used    [weft.LowestPriority + 1]int      // pops of the head in its turn
	weight  map[laneID]int
}

type laneID struct {
	p   int
	key string
}

func newModel() *model { return &model{weight: map[laneID]int{}} }

func (m *model) push(e fair.Entry) bool {
	if m.find(e.ID) >= 0 {
		return false
	}
	switch {
	case e.Priority == 0:
		e.Priority = weft.DefaultPriority
	case e.Priority < weft.HighestPriority:
		e.Priority = weft.HighestPriority
	case e.Priority > weft.LowestPriority:
		e.Priority = weft.LowestPriority
	}
	if e.Weight < 1 {
		e.Weight = 1
	}
	if m.count(e.Priority, e.Key) == 0 {
		m.ring[e.Priority] = append(m.ring[e.Priority], e.Key)
	}
	m.entries = append(m.entries, e)
	m.weight[laneID{e.Priority, e.Key}] = e.Weight
	return true
}

func (m *model) pop() (fair.Entry, bool) {
	for p := weft.HighestPriority; p <= weft.LowestPriority; p++ {
		if len(m.ring[p]) == 0 {
			continue
		}
		if k := m.ring[p][0]; m.used[p] >= m.weight[laneID{p, k}] {
			m.ring[p] = append(m.ring[p][1:], k)
			m.used[p] = 0
		}
		k := m.ring[p][0]
		for i, e := range m.entries {
			if e.Priority == p && e.Key == k {
				m.used[p]++
				m.take(i)
				return e, true
			}
		}
		panic("model: a key in the ring has no entry")
	}
	return fair.Entry{}, false
}

func (m *model) remove(id string) (fair.Entry, bool) {
	i := m.find(id)
	if i < 0 {
		return fair.Entry{}, false
	}
	e := m.entries[i]
	m.take(i)
	return e, true
}

// take deletes entry i; a key left without entries leaves its ring, and
// if it was the head, the next key's turn starts.
func (m *model) take(i int) {
	e := m.entries[i]
	m.entries = slices.Delete(m.entries, i, i+1)
	if m.count(e.Priority, e.Key) > 0 {
		return
	}
	j := slices.Index(m.ring[e.Priority], e.Key)
	m.ring[e.Priority] = slices.Delete(m.ring[e.Priority], j, j+1)
	if j == 0 {
		m.used[e.Priority] = 0
	}
	delete(m.weight, laneID{e.Priority, e.Key})
}

func (m *model) find(id string) int {
	return slices.IndexFunc(m.entries, func(e fair.Entry) bool { return e.ID == id })
}

func (m *model) count(p int, key string) int {
	n := 0
	for _, e := range m.entries {
		if e.Priority == p && e.Key == key {
			n++
		}
	}
	return n
}

func (m *model) lanes() []fair.Lane {
	var ls []fair.Lane
	for p := weft.HighestPriority; p <= weft.LowestPriority; p++ {
		for _, k := range m.ring[p] {
			l := fair.Lane{Priority: p, Key: k, Weight: m.weight[laneID{p, k}]}
			for _, e := range m.entries {
				if e.Priority == p && e.Key == k {
					if l.Queued == 0 {
						l.Oldest = e.At
					}
					l.Queued++
				}
			}
			ls = append(ls, l)
		}
	}
	return ls
}

// modelKeys are the keys scripts use.
var modelKeys = []string{"", "a", "b", "c", "d"}

// runScript reads data as operations and applies each to an Order and to
// the model, failing at the first difference in what they return or show.
// Each operation is a byte: its low 3 bits choose push (0–3), pop (4–6) or
// remove (7), its high 5 bits the ID (one of 32, so that pushes meet
// queued IDs and removes find them). A push reads two more bytes (0 when
// the data ends): the first's low 3 bits are the priority + 1 (-1…6, to
// include 0 and the clamped values) and its high bits the key, the
// second's low 2 bits the weight (0…3) and its high bits At, in seconds
// (not in push order, as a clock that steps back would give).
func runScript(t *testing.T, data []byte) {
	var o fair.Order
	m := newModel()
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	for step := 0; len(data) > 0; step++ {
		b := next()
		id := "i" + strconv.Itoa(int(b>>3))
		switch b & 7 {
		case 0, 1, 2, 3:
			b1, b2 := next(), next()
			e := fair.Entry{
				ID:       id,
				Priority: int(b1&7) - 1,
				Key:      modelKeys[int(b1>>3)%len(modelKeys)],
				Weight:   int(b2 & 3),
				At:       epoch.Add(time.Duration(b2>>2) * time.Second),
			}
			if got, want := o.Push(e), m.push(e); got != want {
				t.Fatalf("step %d: Push(%+v) = %v, the model says %v", step, e, got, want)
			}
		case 4, 5, 6:
			got, gok := o.Pop()
			want, wok := m.pop()
			if got != want || gok != wok {
				t.Fatalf("step %d: Pop() = %+v, %v; the model pops %+v, %v", step, got, gok, want, wok)
			}
		case 7:
			got, gok := o.Remove(id)
			want, wok := m.remove(id)
			if got != want || gok != wok {
				t.Fatalf("step %d: Remove(%s) = %+v, %v; the model removes %+v, %v", step, id, got, gok, want, wok)
			}
		}
		compare(t, step, &o, m)
	}
	// Draining both must agree too, whatever the script left.
	for step := -1; ; step-- {
		got, gok := o.Pop()
		want, wok := m.pop()
		if got != want || gok != wok {
			t.Fatalf("drain: Pop() = %+v, %v; the model pops %+v, %v", got, gok, want, wok)
		}
		if !gok {
			break
		}
		compare(t, step, &o, m)
	}
}

// compare checks what the order shows against the model.
func compare(t *testing.T, step int, o *fair.Order, m *model) {
	t.Helper()
	if got, want := o.Len(), len(m.entries); got != want {
		t.Fatalf("step %d: Len() = %d, the model holds %d", step, got, want)
	}
	want := m.lanes()
	got := slices.Collect(o.Lanes())
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: Lanes() = %+v, the model's are %+v", step, got, want)
	}
	for p := weft.HighestPriority; p <= weft.LowestPriority; p++ {
		n := 0
		for _, l := range want {
			if l.Priority == p {
				n += l.Queued
			}
		}
		if got := o.LenAt(p); got != n {
			t.Fatalf("step %d: LenAt(%d) = %d, the model holds %d", step, p, got, n)
		}
	}
	for _, k := range modelKeys {
		var n int
		var oldest time.Time
		for _, l := range want {
			if l.Key != k {
				continue
			}
			if n == 0 || l.Oldest.Before(oldest) {
				oldest = l.Oldest
			}
			n += l.Queued
			if got, ok := o.Lane(l.Priority, k); !ok || got != l {
				t.Fatalf("step %d: Lane(%d, %q) = %+v, %v; the model's is %+v", step, l.Priority, k, got, ok, l)
			}
		}
		if gn, gold := o.Key(k); gn != n || !gold.Equal(oldest) {
			t.Fatalf("step %d: Key(%q) = %d, %s; the model says %d, %s", step, k, gn, gold, n, oldest)
		}
	}
}

// FuzzOrder: whatever the operations, an Order pops, removes and shows
// exactly what the reference model does. The committed corpus is
// testdata/fuzz/FuzzOrder.
//
//	go test -run '^$' -fuzz FuzzOrder ./internal/queue/fair
func FuzzOrder(f *testing.F) {
	f.Add([]byte{})
	// Three keys at the default priority, then pops: round-robin.
	f.Add([]byte{0x00, 0x09, 0x00, 0x08, 0x11, 0x00, 0x10, 0x19, 0x00, 0x04, 0x04, 0x04, 0x04})
	// Weights 3 and 1, a remove, pops.
	f.Add([]byte{0x00, 0x0c, 0x03, 0x08, 0x0c, 0x03, 0x10, 0x14, 0x01, 0x18, 0x0c, 0x03, 0x0f, 0x04, 0x04, 0x04, 0x04})
	// Every priority, clamped ones included, and duplicates.
	f.Add([]byte{0x00, 0x00, 0x00, 0x08, 0x01, 0x00, 0x10, 0x02, 0x00, 0x18, 0x07, 0x00, 0x00, 0x05, 0x00, 0x04, 0x04, 0x04, 0x04, 0x04})
	f.Fuzz(runScript)
}

// TestOrderMatchesModel runs long random scripts, so that every `go test`
// checks the order against the model further than the corpus does.
func TestOrderMatchesModel(t *testing.T) {
	t.Parallel()
	scripts, size := 100, 2000
	if testing.Short() {
		scripts = 20
	}
	for seed := range uint64(scripts) {
		r := rand.New(rand.NewPCG(seed, 35))
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { runScript(t, data) })
	}
}

// TestBacklogDrained: an order that empties after a backlog larger than
// the slabs it keeps (it then releases them) hands the backlog out in
// order, and then serves new entries as the model does.
func TestBacklogDrained(t *testing.T) {
	t.Parallel()
	var o fair.Order
	for round := range 2 {
		// Four keys of equal weight, pushed in turn: round-robin pops
		// them in push order.
		const backlog = 5000
		for i := range backlog {
			o.Push(fair.Entry{ID: "i" + strconv.Itoa(i), Key: modelKeys[1+i%4]})
		}
		for i := range backlog {
			if e, ok := o.Pop(); !ok || e.ID != "i"+strconv.Itoa(i) {
				t.Fatalf("round %d: pop %d = %+v, %v; want i%d", round, i, e, ok, i)
			}
		}
		if e, ok := o.Pop(); ok || o.Len() != 0 {
			t.Fatalf("round %d: the drained order pops %+v and holds %d", round, e, o.Len())
		}
		m := newModel()
		for i := range 50 {
			e := fair.Entry{ID: "j" + strconv.Itoa(i), Key: modelKeys[i%len(modelKeys)], Priority: i % 7, Weight: i % 4}
			if got, want := o.Push(e), m.push(e); got != want {
				t.Fatalf("round %d: Push(%+v) = %v, the model says %v", round, e, got, want)
			}
			compare(t, i, &o, m)
		}
		for {
			got, gok := o.Pop()
			want, wok := m.pop()
			if got != want || gok != wok {
				t.Fatalf("round %d: Pop() = %+v, %v; the model pops %+v, %v", round, got, gok, want, wok)
			}
			if !gok {
				break
			}
			compare(t, -1, &o, m)
		}
	}
}
