package gencache

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCache runs scripts of calls on a fresh Cache[string, int, string],
// one call a line, each with what it must answer:
//
//	put KEY GEN VALUE
//	get KEY GEN = VALUE | miss
//	peek KEY = VALUE@GEN | miss
//	observe GEN
func TestCache(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
	}{
		{"empty", `
			get a 0 = miss
			peek a = miss
			observe 0
			observe 1
			get a 1 = miss`},
		{"an entry is valid at its own generation only", `
			put a 1 x
			get a 1 = x
			get a 0 = miss
			get a 2 = miss
			peek a = x@1
			get b 1 = miss`},
		{"a put replaces the entry and its tag", `
			put a 1 x
			put a 2 y
			get a 1 = miss
			get a 2 = y
			peek a = y@2
			put a 1 z
			get a 2 = miss
			peek a = z@1`},
		{"keys are apart", `
			put a 1 x
			put b 2 y
			get a 1 = x
			get b 2 = y
			get a 2 = miss
			get b 1 = miss`},
		{"the zero value has observed the zero generation", `
			put a 0 x
			observe 0
			get a 0 = x`},
		{"observing the same generation keeps every entry", `
			observe 1
			put a 1 x
			put b 0 y
			observe 1
			peek a = x@1
			peek b = y@0`},
		{"observing another generation drops every entry", `
			observe 1
			put a 1 x
			put b 2 y
			put c 0 z
			observe 2
			peek a = miss
			peek b = miss
			peek c = miss
			get b 2 = miss
			put a 2 w
			get a 2 = w`},
		{"an older generation is another one too", `
			observe 3
			put a 3 x
			observe 2
			peek a = miss
			put a 2 y
			observe 3
			peek a = miss`},
		{"a put after the generation moved on is kept but never valid there", `
			observe 2
			put a 1 x
			get a 2 = miss
			peek a = x@1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c Cache[string, int, string]
			for line := range strings.Lines(tt.script) {
				line = strings.TrimSpace(line)
				if line == "" {
					continue
				}
				f := strings.Fields(line)
				switch {
				case f[0] == "put" && len(f) == 4:
					c.Put(f[1], atoi(t, f[2]), f[3])
				case f[0] == "get" && len(f) == 5 && f[3] == "=":
					v, ok := c.Get(f[1], atoi(t, f[2]))
					if got := answer(v, ok); got != f[4] {
						t.Errorf("%s: got %s", line, got)
					}
				case f[0] == "peek" && len(f) == 4 && f[2] == "=":
					v, gen, ok := c.Peek(f[1])
					if got := answer(v+"@"+strconv.Itoa(gen), ok); got != f[3] {
						t.Errorf("%s: got %s", line, got)
					}
				case f[0] == "observe" && len(f) == 2:
					c.Observe(atoi(t, f[1]))
				default:
					t.Fatalf("bad script line %q", line)
				}
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad generation %q: %v", s, err)
	}
	return n
}

func answer(v string, ok bool) string {
	if !ok {
		return "miss"
	}
	return v
}

// TestCacheHammer: readers put and get while the generation moves on, as
// a store's readers do while its catalog changes. Every value names the
// key and generation it was put with, so that a Get or a Peek that
// answers another key's value, or a value under another generation's tag,
// is caught; run with -race, it checks the locking too.
func TestCacheHammer(t *testing.T) {
	t.Parallel()
	type value struct{ key, gen int }
	const (
		readers = 8
		loops   = 2000
		keys    = 5
	)
	var c Cache[int, int, value]
	var gen atomic.Int64 // the current generation, as a store's counter
	var wg sync.WaitGroup
	wg.Go(func() { // the writer: the generation moves on, then is observed
		for range loops {
			c.Observe(int(gen.Add(1)))
		}
	})
	for r := range readers {
		wg.Go(func() {
			for i := range loops {
				k := (r + i) % keys
				g := int(gen.Load())
				c.Observe(g)
				if v, ok := c.Get(k, g); ok && v != (value{k, g}) {
					t.Errorf("Get(%d, %d) = %+v", k, g, v)
					return
				}
				c.Put(k, g, value{k, g})
				if v, tag, ok := c.Peek(k); ok && (v.key != k || v.gen != tag) {
					t.Errorf("Peek(%d) = %+v tagged %d", k, v, tag)
					return
				}
			}
		})
	}
	wg.Wait()

	// Quiet now: a put is got back at its generation, and the next
	// generation drops it.
	g := int(gen.Load())
	c.Observe(g)
	for k := range keys {
		c.Put(k, g, value{k, g})
		if v, ok := c.Get(k, g); !ok || v != (value{k, g}) {
			t.Errorf("after the hammer: Get(%d, %d) = %+v, %t", k, g, v, ok)
		}
	}
	c.Observe(g + 1)
	for k := range keys {
		if _, _, ok := c.Peek(k); ok {
			t.Errorf("after the generation moved on: key %d still cached", k)
		}
	}
}
