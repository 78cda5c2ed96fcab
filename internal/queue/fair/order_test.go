package fair_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/queue/fair"
)

// epoch is the time the files' offsets count from.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestOrder scripts an Order push by push and pop by pop and compares what
// it hands out and what it shows. Each file in testdata/order is one
// Order; testdata/README.md describes the format. `go test
// ./internal/queue/fair -rewrite` writes what the order does now as the
// expected outputs.
func TestOrder(t *testing.T) {
	t.Parallel()
	datadriven.Walk(t, "testdata/order", func(t *testing.T, path string) {
		t.Parallel()
		var o fair.Order
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return run(t, &o, d)
		})
	})
}

// run applies one directive:
//
//	push ID... [p=N] [key=K] [w=N] [at=D]   the same options for every ID
//	pop [N|all] [full]                      N pops (1 unless given)
//	remove ID...
//	stats                                   Len, LenAt and every lane
//	lane P KEY | key KEY                    one lane | one key's sum
//
// A directive that prints nothing prints "ok", so that an empty expected
// output is never mistaken for a forgotten one.
func run(t *testing.T, o *fair.Order, d *datadriven.TestData) string {
	var out strings.Builder
	var words []string
	opts := map[string]string{}
	for _, arg := range d.CmdArgs {
		switch len(arg.Vals) {
		case 0:
			words = append(words, arg.Key)
		case 1:
			opts[arg.Key] = arg.Vals[0]
		default:
			d.Fatalf(t, "%s: option %s has %d values", d.Cmd, arg.Key, len(arg.Vals))
		}
	}
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			d.Fatalf(t, "%s: %v", d.Cmd, err)
		}
		return n
	}
	only := func(names ...string) {
		for k := range opts {
			if !slices.Contains(names, k) {
				d.Fatalf(t, "%s: unknown option %q", d.Cmd, k)
			}
		}
	}
	switch d.Cmd {
	case "push":
		only("p", "key", "w", "at")
		if len(words) == 0 {
			d.Fatalf(t, "push: no ID")
		}
		e := fair.Entry{Key: opts["key"], At: epoch}
		if v, ok := opts["p"]; ok {
			e.Priority = num(v)
		}
		if v, ok := opts["w"]; ok {
			e.Weight = num(v)
		}
		if v, ok := opts["at"]; ok {
			dd, err := time.ParseDuration(v)
			if err != nil {
				d.Fatalf(t, "push: %v", err)
			}
			e.At = epoch.Add(dd)
		}
		for _, id := range words {
			e.ID = id
			if !o.Push(e) {
				fmt.Fprintf(&out, "%s: already queued\n", id)
			}
		}
	case "pop":
		only()
		n, full := 1, false
		for _, w := range words {
			switch {
			case w == "full":
				full = true
			case w == "all":
				n = -1
			default:
				n = num(w)
			}
		}
		var ids []string
		for i := 0; n < 0 || i < n; i++ {
			e, ok := o.Pop()
			if !ok {
				ids = append(ids, "(empty)")
				break
			}
			if full {
				fmt.Fprintln(&out, entry(e))
			}
			ids = append(ids, e.ID)
		}
		if !full {
			fmt.Fprintln(&out, strings.Join(ids, " "))
		} else if ids[len(ids)-1] == "(empty)" {
			fmt.Fprintln(&out, "(empty)")
		}
	case "remove":
		only()
		for _, id := range words {
			if e, ok := o.Remove(id); ok {
				fmt.Fprintf(&out, "removed %s\n", entry(e))
			} else {
				fmt.Fprintf(&out, "%s: not queued\n", id)
			}
		}
	case "stats":
		only()
		fmt.Fprintf(&out, "len=%d", o.Len())
		for p := weft.HighestPriority; p <= weft.LowestPriority; p++ {
			fmt.Fprintf(&out, " p%d=%d", p, o.LenAt(p))
		}
		out.WriteString("\n")
		for l := range o.Lanes() {
			fmt.Fprintln(&out, lane(l))
		}
	case "lane":
		only()
		if len(words) < 1 || len(words) > 2 {
			d.Fatalf(t, "lane P [KEY]")
		}
		key := ""
		if len(words) == 2 {
			key = words[1]
		}
		if l, ok := o.Lane(num(words[0]), key); ok {
			fmt.Fprintln(&out, lane(l))
		} else {
			fmt.Fprintln(&out, "no lane")
		}
	case "key":
		only()
		if len(words) > 1 {
			d.Fatalf(t, "key [KEY]")
		}
		key := ""
		if len(words) == 1 {
			key = words[0]
		}
		n, oldest := o.Key(key)
		if n == 0 {
			fmt.Fprintf(&out, "%s: queued=0\n", name(key))
		} else {
			fmt.Fprintf(&out, "%s: queued=%d oldest=%s\n", name(key), n, oldest.Sub(epoch))
		}
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	if out.Len() == 0 {
		return "ok"
	}
	return out.String()
}

func entry(e fair.Entry) string {
	return fmt.Sprintf("%s p=%d key=%s w=%d at=%s", e.ID, e.Priority, name(e.Key), e.Weight, e.At.Sub(epoch))
}

func lane(l fair.Lane) string {
	return fmt.Sprintf("p%d %s w=%d queued=%d oldest=%s", l.Priority, name(l.Key), l.Weight, l.Queued, l.Oldest.Sub(epoch))
}

// name shows the key "" as "" so that it is visible.
func name(key string) string {
	if key == "" {
		return `""`
	}
	return key
}
