package embedded

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

func TestKeyStrings(t *testing.T) {
	t.Parallel()
	strs := []string{"", "a", "a\x00", "a\x00b", "a\x00\x01", "a\x01", "ab", "b", "\x00", "\xff", "é"}
	for _, a := range strs {
		for _, b := range strs {
			k := key(nil).str(a).str(b)
			ga, rest, ok := readStr(k)
			gb, rest2, ok2 := readStr(rest)
			if !ok || !ok2 || ga != a || gb != b || len(rest2) != 0 {
				t.Errorf("(%q, %q) decodes as (%q, %q) rest %x", a, b, ga, gb, rest2)
			}
			// Order of tuples is the order of the encoded keys.
			for _, c := range strs {
				for _, d := range strs {
					want := cmpTuple(a, b, c, d)
					got := bytes.Compare(k, key(nil).str(c).str(d))
					if sign(got) != want {
						t.Fatalf("(%q,%q) vs (%q,%q): byte order %d, tuple order %d", a, b, c, d, got, want)
					}
				}
			}
		}
	}
	for _, bad := range [][]byte{nil, {'a'}, {'a', 0}, {'a', 0, 7}} {
		if _, _, ok := readStr(bad); ok {
			t.Errorf("readStr(%x) succeeded", bad)
		}
	}
}

func cmpTuple(a, b, c, d string) int {
	if a != c {
		return sign(cmpStr(a, c))
	}
	return sign(cmpStr(b, d))
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestKeyTimes(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Unix(0, 0),
		time.Unix(0, 1),
		time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	var keys [][]byte
	for _, tm := range times {
		k := key(nil).time(tm)
		got, rest, ok := readTime(k)
		if !ok || !got.Equal(tm) || len(rest) != 0 {
			t.Errorf("%v decodes as %v", tm, got)
		}
		keys = append(keys, k)
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Error("time keys are not in time order")
	}
}

func TestCursor(t *testing.T) {
	t.Parallel()
	k := key(nil).time(time.Unix(5, 0)).str("id\x00")
	got, err := decodeCursor(encodeCursor(k))
	if err != nil || !bytes.Equal(got, k) {
		t.Errorf("round trip: %x, %v", got, err)
	}
	for _, bad := range []string{"", "!!", "a b"} {
		if _, err := decodeCursor(bad); err == nil {
			t.Errorf("decodeCursor(%q) succeeded", bad)
		}
	}
}
