package redisstore

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

func num(f float64) weft.SearchValue { return weft.SearchValue{Type: weft.SearchNumber, Number: f} }
func str(s string) weft.SearchValue  { return weft.SearchValue{Type: weft.SearchString, String: s} }
func tm(t time.Time) weft.SearchValue {
	return weft.SearchValue{Type: weft.SearchTime, Time: t}
}

// TestSearchEncodingOrder: the encodings of values in ascending order are
// ascending byte strings, and stay so with any tail after them (created
// time and id), since no encoding is a prefix of another.
func TestSearchEncodingOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		typ  weft.SearchType
		asc  []weft.SearchValue
	}{
		{"number", weft.SearchNumber, []weft.SearchValue{
			num(math.Inf(-1)), num(-math.MaxFloat64), num(-1e300), num(-2), num(-1), num(-0.5),
			num(-math.SmallestNonzeroFloat64), num(0), num(math.SmallestNonzeroFloat64), num(0.5), num(1),
			num(1.0000000000000002), num(2), num(1e300), num(math.MaxFloat64), num(math.Inf(1)),
		}},
		{"string", weft.SearchString, []weft.SearchValue{
			str(""), str("\x00"), str("\x00\x00"), str("\x00\x01"), str("\x01"), str("a"), str("a\x00"), str("a\x00b"),
			str("a\x01"), str("ab"), str("b"), str("\xff"), str("\xff\xff"),
		}},
		{"time", weft.SearchTime, []weft.SearchValue{
			tm(time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)), tm(time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC)),
			tm(time.Unix(0, 0)), tm(time.Unix(0, 1)), tm(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
			tm(time.Date(2030, 1, 2, 3, 4, 5, 1, time.FixedZone("x", 3600)).Add(time.Hour)),
		}},
		{"bool", weft.SearchBool, []weft.SearchValue{{Type: weft.SearchBool}, {Type: weft.SearchBool, Bool: true}}},
	}
	tails := []string{"", "\x00", "0000000000000000a", "ffffffffffffffffz", "\xff"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var prev string
			for i, v := range tt.asc {
				enc, err := encodeSearch(tt.typ, v)
				if err != nil {
					t.Fatalf("%v: %v", v.Native(), err)
				}
				if w := searchWidth(tt.typ); w > 0 && len(enc) != w {
					t.Errorf("%v: encoding %q is %d bytes, want %d", v.Native(), enc, len(enc), w)
				}
				if i > 0 {
					for _, a := range tails {
						for _, b := range tails {
							if prev+a >= enc+b {
								t.Errorf("%v: %q + %q sorts after the next value's %q + %q", tt.asc[i-1].Native(), prev, a, enc, b)
							}
						}
					}
				}
				prev = enc
			}
		})
	}
	zero, _ := encodeNumber(0)
	if neg, _ := encodeNumber(math.Copysign(0, -1)); neg != zero {
		t.Errorf("-0 encodes as %q, 0 as %q", neg, zero)
	}
	if _, err := encodeNumber(math.NaN()); err == nil {
		t.Error("NaN encoded")
	}
}

// TestPlanSearchInvalid: a range that does not fit its type is ErrInvalid,
// naming the field at fault.
func TestPlanSearchInvalid(t *testing.T) {
	t.Parallel()
	one := num(1)
	s := str("a")
	tests := []struct {
		name string
		r    weft.SearchRange
		want string
	}{
		{"no name", weft.SearchRange{Type: weft.SearchString}, "Name"},
		{"bad type", weft.SearchRange{Name: "x", Type: "int"}, "Type"},
		{"in of another type", weft.SearchRange{Name: "x", Type: weft.SearchNumber, In: []weft.SearchValue{one, s}}, "In[1]"},
		{"keywords in keywords", weft.SearchRange{Name: "x", Type: weft.SearchKeywords, In: []weft.SearchValue{{Type: weft.SearchKeywords, Keywords: []string{"a"}}}}, "In[0]"},
		{"NaN", weft.SearchRange{Name: "x", Type: weft.SearchNumber, In: []weft.SearchValue{num(math.NaN())}}, "In[0]"},
		{"lo of another type", weft.SearchRange{Name: "x", Type: weft.SearchTime, Lo: &one}, "Lo"},
		{"hi of another type", weft.SearchRange{Name: "x", Type: weft.SearchString, Hi: &one}, "Hi"},
		{"prefix on a number", weft.SearchRange{Name: "x", Type: weft.SearchNumber, Prefix: "1"}, "Prefix"},
		{"prefix on a bool", weft.SearchRange{Name: "x", Type: weft.SearchBool, Prefix: "t"}, "Prefix"},
		{"in and bounds", weft.SearchRange{Name: "x", Type: weft.SearchNumber, In: []weft.SearchValue{one}, Lo: &one}, "more than one"},
		{"bounds and prefix", weft.SearchRange{Name: "x", Type: weft.SearchString, Hi: &s, Prefix: "a"}, "more than one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := planSearch(tt.r)
			if !errors.Is(err, weft.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalid naming %s", err, tt.want)
			}
		})
	}
}

// inPlan reports whether an index member is in one of the plan's
// intervals, as ZRANGEBYLEX reads them.
func inPlan(p searchPlan, m string) bool {
	for _, sg := range p.segs {
		lo, hi := sg[0], sg[1]
		okLo := lo == "-" || lo[0] == '[' && m >= lo[1:] || lo[0] == '(' && m > lo[1:]
		okHi := hi == "+" || hi[0] == '[' && m <= hi[1:] || hi[0] == '(' && m < hi[1:]
		if okLo && okHi {
			return true
		}
	}
	return false
}

// inRange is the meaning of a SearchRange for one value, written from
// the values, not their encodings.
func inRange(r weft.SearchRange, v weft.SearchValue) bool {
	cmp := func(a, b weft.SearchValue) int { return cmpSearch(r.Type, a, b) }
	switch {
	case len(r.In) > 0:
		for _, x := range r.In {
			if cmp(v, x) == 0 {
				return true
			}
		}
		return false
	case r.Lo != nil || r.Hi != nil:
		if r.Lo != nil {
			if c := cmp(v, *r.Lo); c < 0 || c == 0 && !r.LoInc {
				return false
			}
		}
		if r.Hi != nil {
			if c := cmp(v, *r.Hi); c > 0 || c == 0 && !r.HiInc {
				return false
			}
		}
		return true
	}
	return strings.HasPrefix(v.String, r.Prefix)
}

// cmpSearch compares two values of type typ (strings for keywords) as the
// index orders them, written from the values.
func cmpSearch(typ weft.SearchType, a, b weft.SearchValue) int {
	switch typ {
	case weft.SearchNumber:
		switch {
		case a.Number < b.Number:
			return -1
		case a.Number > b.Number:
			return 1
		}
		return 0
	case weft.SearchTime:
		return a.Time.Compare(b.Time)
	case weft.SearchBool:
		switch {
		case a.Bool == b.Bool:
			return 0
		case b.Bool:
			return -1
		}
		return 1
	}
	return strings.Compare(a.String, b.String)
}

// TestPlanSearchRanges: for random values and ranges of each type, a
// value's index members (with any created time and id after it) are in
// the plan's intervals exactly when the value is in the range.
func TestPlanSearchRanges(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	nums := []float64{math.Inf(-1), -1e9, -2.5, -1, math.Copysign(0, -1), 0, 1e-300, 1, 2.5, 3, 1e9, math.Inf(1)}
	strs := []string{"", "\x00", "a", "a\x00", "a\x00b", "ab", "abc", "b", "ba", "\xfe", "\xff", "\xff\xff"}
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	value := func(typ weft.SearchType) weft.SearchValue {
		switch typ {
		case weft.SearchNumber:
			return num(nums[rng.IntN(len(nums))])
		case weft.SearchTime:
			return tm(base.Add(time.Duration(rng.IntN(7)-3) * time.Nanosecond))
		case weft.SearchBool:
			return weft.SearchValue{Type: weft.SearchBool, Bool: rng.IntN(2) == 1}
		}
		return str(strs[rng.IntN(len(strs))])
	}
	tails := []string{"0000000000000000", "8000000000000000x", "ffffffffffffffff\xff"}
	for _, typ := range []weft.SearchType{weft.SearchNumber, weft.SearchString, weft.SearchTime, weft.SearchBool} {
		for range 400 {
			r := weft.SearchRange{Name: "x", Type: typ}
			switch k := rng.IntN(4); {
			case k == 0:
				for range 1 + rng.IntN(3) {
					r.In = append(r.In, value(typ))
				}
			case k == 1 && typ == weft.SearchString:
				r.Prefix = strs[rng.IntN(len(strs))]
			default:
				if rng.IntN(3) > 0 {
					lo := value(typ)
					r.Lo, r.LoInc = &lo, rng.IntN(2) == 1
				}
				if rng.IntN(3) > 0 {
					hi := value(typ)
					r.Hi, r.HiInc = &hi, rng.IntN(2) == 1
				}
			}
			p, err := planSearch(r)
			if err != nil {
				t.Fatalf("%+v: %v", r, err)
			}
			for range 20 {
				v := value(typ)
				enc, err := encodeSearch(typ, v)
				if err != nil {
					t.Fatal(err)
				}
				want := inRange(r, v)
				for _, tail := range tails {
					if got := inPlan(p, enc+tail); got != want {
						t.Fatalf("range %+v (plan %q): value %v with tail %q: in plan %v, in range %v", r, p.segs, v.Native(), tail, got, want)
					}
				}
			}
		}
	}
}

// TestSearchField: an instance's sa field lists its (name, value) pairs
// sorted, one per distinct keyword, and refuses what cannot be indexed.
func TestSearchField(t *testing.T) {
	t.Parallel()
	got, err := searchField("i", weft.SearchAttributes{
		"tags":   {Type: weft.SearchKeywords, Keywords: []string{"b", "a", "b"}},
		"amount": num(-1),
		"none":   {Type: weft.SearchKeywords},
	})
	if err != nil {
		t.Fatal(err)
	}
	minusOne, _ := encodeNumber(-1)
	if want := "6:amount16:" + minusOne + "4:tags3:a\x00\x014:tags3:b\x00\x01"; got != want {
		t.Errorf("sa = %q, want %q", got, want)
	}
	if got, err := searchField("i", nil); got != "" || err != nil {
		t.Errorf("no attributes: %q, %v", got, err)
	}
	for name, attrs := range map[string]weft.SearchAttributes{
		"NaN":               {"n": num(math.NaN())},
		"infinity":          {"n": num(math.Inf(-1))},
		"not UTF-8":         {"s": str("a\xff")},
		"keyword not UTF-8": {"k": {Type: weft.SearchKeywords, Keywords: []string{"ok", "\xc3"}}},
		"unknown type":      {"n": {Type: "int"}},
		"empty name":        {"": num(1)},
	} {
		if _, err := searchField("i", attrs); !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

// TestSearchMemberID reads the id after values of each width.
func TestSearchMemberID(t *testing.T) {
	t.Parallel()
	ct := strings.Repeat("0", 16)
	tests := []struct {
		width  int
		member string
		id     string
		ok     bool
	}{
		{0, "a\x00\xffb\x00\x01" + ct + "id-1", "id-1", true},
		{16, strings.Repeat("f", 16) + ct + "x", "x", true},
		{1, "1" + ct + "y", "y", true},
		{0, "a" + ct + "id", "", false},
		{16, strings.Repeat("f", 16) + ct, "", false},
	}
	for _, tt := range tests {
		id, ok := searchMemberID(tt.width, tt.member)
		if id != tt.id || ok != tt.ok {
			t.Errorf("searchMemberID(%d, %q) = %q, %v; want %q, %v", tt.width, tt.member, id, ok, tt.id, tt.ok)
		}
	}
}
