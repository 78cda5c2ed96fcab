package embedded

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// TestSearchValueOrder: the encodings of each type's values, in order,
// sort byte-wise in that order; -0 and 0 encode alike; searchValueLen
// finds where each ends.
func TestSearchValueOrder(t *testing.T) {
	t.Parallel()
	negZero := math.Copysign(0, -1)
	num := func(fs ...float64) []weft.SearchValue {
		var vs []weft.SearchValue
		for _, f := range fs {
			vs = append(vs, weft.SearchValue{Type: weft.SearchNumber, Number: f})
		}
		return vs
	}
	str := func(ss ...string) []weft.SearchValue {
		var vs []weft.SearchValue
		for _, s := range ss {
			vs = append(vs, weft.SearchValue{Type: weft.SearchString, String: s})
		}
		return vs
	}
	tm := func(ts ...time.Time) []weft.SearchValue {
		var vs []weft.SearchValue
		for _, x := range ts {
			vs = append(vs, weft.SearchValue{Type: weft.SearchTime, Time: x})
		}
		return vs
	}
	tests := []struct {
		typ weft.SearchType
		// ordered, strictly ascending
		values []weft.SearchValue
	}{
		{weft.SearchNumber, num(math.Inf(-1), -math.MaxFloat64, -1e300, -2, -1.5, -1, -math.SmallestNonzeroFloat64, 0,
			math.SmallestNonzeroFloat64, 1, 1.5, 2, 1e300, math.MaxFloat64, math.Inf(1))},
		{weft.SearchString, str("", "\x00", "\x00\x00", "\x00\x01", "A", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "é", "\xff")},
		{weft.SearchTime, tm(time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 999, time.UTC),
			time.Unix(0, 0), time.Unix(0, 1), time.Date(2030, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))},
		{weft.SearchBool, []weft.SearchValue{{Type: weft.SearchBool}, {Type: weft.SearchBool, Bool: true}}},
	}
	for _, tt := range tests {
		var keys [][]byte
		for _, v := range tt.values {
			k := appendSearchValue(nil, tt.typ, v)
			tail := []byte("rest")
			n, ok := searchValueLen(append(bytes.Clone(k), tail...), tt.typ)
			if !ok || n != len(k) {
				t.Errorf("%s %v: searchValueLen = %d, %t, want %d", tt.typ, v.Native(), n, ok, len(k))
			}
			keys = append(keys, k)
		}
		for i := 1; i < len(keys); i++ {
			if bytes.Compare(keys[i-1], keys[i]) >= 0 {
				t.Errorf("%s: %v encodes at or above %v", tt.typ, tt.values[i-1].Native(), tt.values[i].Native())
			}
		}
	}
	if a, b := appendNumber(nil, negZero), appendNumber(nil, 0); !bytes.Equal(a, b) {
		t.Errorf("-0 encodes as %x, 0 as %x", a, b)
	}
}

// TestSearchKeys: an instance's keys are sorted, once each (a keyword
// held twice is one key), none for no attributes.
func TestSearchKeys(t *testing.T) {
	t.Parallel()
	in := &weft.Instance{ID: "i", CreatedAt: time.Unix(5, 0), Search: weft.SearchAttributes{
		"tags":     {Type: weft.SearchKeywords, Keywords: []string{"b", "a", "b"}},
		"customer": {Type: weft.SearchString, String: "acme"},
		"amount":   {Type: weft.SearchNumber, Number: 3},
	}}
	ks := searchKeys(in)
	if len(ks) != 4 || !slices.IsSortedFunc(ks, bytes.Compare) {
		t.Errorf("searchKeys = %q, want 4 sorted keys", ks)
	}
	if ks := searchKeys(&weft.Instance{ID: "i"}); ks != nil {
		t.Errorf("searchKeys of no attributes = %q", ks)
	}
}

// TestSearchSpans: the key intervals of ranges, checked by the keys they
// hold and those they leave out.
func TestSearchSpans(t *testing.T) {
	t.Parallel()
	s := func(v string) weft.SearchValue { return weft.SearchValue{Type: weft.SearchString, String: v} }
	n := func(f float64) weft.SearchValue { return weft.SearchValue{Type: weft.SearchNumber, Number: f} }
	p := func(v weft.SearchValue) *weft.SearchValue { return &v }
	k := func(name string, typ weft.SearchType, v weft.SearchValue) []byte {
		vt := typ
		if vt == weft.SearchKeywords {
			vt = weft.SearchString
		}
		return key(appendSearchValue(searchBase(name, typ), vt, v)).time(time.Unix(1, 0)).str("id")
	}
	tests := []struct {
		name    string
		r       weft.SearchRange
		in, out [][]byte
	}{
		{"In", weft.SearchRange{Name: "c", Type: weft.SearchString, In: []weft.SearchValue{s("b"), s("a")}},
			[][]byte{k("c", weft.SearchString, s("a")), k("c", weft.SearchString, s("b"))},
			[][]byte{k("c", weft.SearchString, s("ab")), k("c", weft.SearchString, s("")), k("c", weft.SearchKeywords, s("a")), k("cc", weft.SearchString, s("a"))}},
		{"prefix ending in NUL", weft.SearchRange{Name: "c", Type: weft.SearchString, Prefix: "a\x00"},
			[][]byte{k("c", weft.SearchString, s("a\x00")), k("c", weft.SearchString, s("a\x00\xff")), k("c", weft.SearchString, s("a\x00\x00"))},
			[][]byte{k("c", weft.SearchString, s("a")), k("c", weft.SearchString, s("a\x01")), k("c", weft.SearchString, s("b"))}},
		{"prefix ending in 0xff", weft.SearchRange{Name: "c", Type: weft.SearchKeywords, Prefix: "a\xff"},
			[][]byte{k("c", weft.SearchKeywords, s("a\xff")), k("c", weft.SearchKeywords, s("a\xff\xff"))},
			[][]byte{k("c", weft.SearchKeywords, s("a")), k("c", weft.SearchKeywords, s("b")), k("c", weft.SearchString, s("a\xff"))}},
		{"(open, closed]", weft.SearchRange{Name: "n", Type: weft.SearchNumber, Lo: p(n(-1)), Hi: p(n(1)), HiInc: true},
			[][]byte{k("n", weft.SearchNumber, n(-0.5)), k("n", weft.SearchNumber, n(1))},
			[][]byte{k("n", weft.SearchNumber, n(-1)), k("n", weft.SearchNumber, n(1.5))}},
		{"unbounded", weft.SearchRange{Name: "n", Type: weft.SearchNumber},
			[][]byte{k("n", weft.SearchNumber, n(math.Inf(-1))), k("n", weft.SearchNumber, n(math.Inf(1)))},
			[][]byte{k("n", weft.SearchString, s("1")), k("m", weft.SearchNumber, n(0))}},
		{"empty", weft.SearchRange{Name: "n", Type: weft.SearchNumber, Lo: p(n(1)), Hi: p(n(1))},
			nil, [][]byte{k("n", weft.SearchNumber, n(1))}},
	}
	for _, tt := range tests {
		spans, err := searchSpans(&tt.r)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for _, key := range tt.in {
			if !inSpans(spans, key) {
				t.Errorf("%s: %x is not in the spans", tt.name, key)
			}
		}
		for _, key := range tt.out {
			if inSpans(spans, key) {
				t.Errorf("%s: %x is in the spans", tt.name, key)
			}
		}
	}
}
