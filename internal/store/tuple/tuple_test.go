package tuple_test

import (
	"bytes"
	"cmp"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/store/tuple"
)

// FuzzTuple: two (string, time, string) tuples round-trip through the
// encoding, from bytes and from a string, and their encodings sort as the
// tuples do; a tuple's encoding lies within PrefixEnd of its first
// component's.
func FuzzTuple(f *testing.F) {
	f.Add("a", int64(0), "b", "a", int64(1), "")
	f.Add("a\x00", int64(-1), "\x00\x01", "a", int64(1<<62), "\xff")
	f.Add("", int64(0), "", "\x00", int64(0), "")
	f.Fuzz(func(t *testing.T, s1 string, n1 int64, u1 string, s2 string, n2 int64, u2 string) {
		enc := func(s string, n int64, u string) []byte {
			b := tuple.AppendString(nil, s)
			b = tuple.AppendTime(b, time.Unix(0, n))
			return tuple.AppendString(b, u)
		}
		a, b := enc(s1, n1, u1), enc(s2, n2, u2)
		for _, c := range []struct {
			s    string
			n    int64
			u    string
			code []byte
		}{{s1, n1, u1, a}, {s2, n2, u2, b}} {
			s, rest, ok := tuple.ReadString(c.code)
			if !ok || s != c.s {
				t.Fatalf("ReadString(%q) = %q, %v; want %q", c.code, s, ok, c.s)
			}
			if ss, _, ok := tuple.ReadString(string(c.code)); !ok || ss != c.s {
				t.Fatalf("ReadString(string %q) = %q, %v; want %q", c.code, ss, ok, c.s)
			}
			tm, rest, ok := tuple.ReadTime(rest)
			if !ok || tm.UnixNano() != c.n {
				t.Fatalf("ReadTime: %v %v, want %d", tm, ok, c.n)
			}
			u, rest, ok := tuple.ReadString(rest)
			if !ok || u != c.u || len(rest) != 0 {
				t.Fatalf("ReadString = %q, %q, %v; want %q and nothing after", u, rest, ok, c.u)
			}
			p := tuple.AppendString(nil, c.s)
			if bytes.Compare(c.code, p) < 0 || bytes.Compare(c.code, tuple.PrefixEnd(p)) >= 0 {
				t.Fatalf("%q is outside [%q, PrefixEnd)", c.code, p)
			}
		}
		want := cmp.Or(cmp.Compare(s1, s2), cmp.Compare(n1, n2), cmp.Compare(u1, u2))
		if got := bytes.Compare(a, b); got != want {
			t.Fatalf("compare(%q, %q) = %d, want %d (tuples %q %d %q and %q %d %q)", a, b, got, want, s1, n1, u1, s2, n2, u2)
		}
	})
}

// TestAppendTimeClamps: times beyond what int64 nanoseconds hold sort
// after (or before) every other instead of wrapping, and read back as the
// bound.
func TestAppendTimeClamps(t *testing.T) {
	last := time.Unix(0, 1<<63-1)
	first := time.Unix(0, -1<<63)
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	early := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	if bytes.Compare(tuple.AppendTime(nil, far), tuple.AppendTime(nil, now)) <= 0 {
		t.Errorf("the year 3000 does not sort after 2026")
	}
	if bytes.Compare(tuple.AppendTime(nil, early), tuple.AppendTime(nil, now)) >= 0 {
		t.Errorf("the year 1000 does not sort before 2026")
	}
	for in, want := range map[time.Time]time.Time{far: last, early: first, last: last, first: first} {
		got, _, ok := tuple.ReadTime(tuple.AppendTime(nil, in))
		if !ok || !got.Equal(want) {
			t.Errorf("%s reads back as %s, want %s", in, got, want)
		}
	}
}
