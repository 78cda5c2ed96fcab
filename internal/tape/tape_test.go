package tape_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/weftworks/weft/internal/tape"
)

// sample is a tape of each kind of call.
func sample() *tape.Tape {
	return &tape.Tape{Entries: []tape.Entry{
		{Kind: tape.KindInfo, Answer: []byte(`{"instance_id":"i-1","attempt":2}`)},
		{Kind: tape.KindClock, Ask: []byte("0"), Value: 1764464400123456789},
		{Kind: tape.KindRandom, Ask: []byte("16"), Answer: bytes.Repeat([]byte{0xab}, 16)},
		{Kind: tape.KindConfig, Ask: []byte("region"), Value: -1},
		{Kind: tape.KindSecret, Ask: []byte("api_key")},
		{Kind: tape.KindHTTP, Ask: []byte("GET http://127.0.0.1:8080/x\n"), Answer: []byte("HTTP/1.1 200\n\nok"), Value: 200},
		{Kind: tape.KindClock, Ask: []byte("1"), Value: -5},
	}}
}

func TestMarshalRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name string
		tape *tape.Tape
	}{
		{"empty", &tape.Tape{}},
		{"every kind", sample()},
		{"truncated", func() *tape.Tape { s := sample(); s.Truncated = true; return s }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.tape.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := tape.Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if got.Truncated != tc.tape.Truncated || len(got.Entries) != len(tc.tape.Entries) {
				t.Fatalf("got %d entries truncated %v, want %d, %v", len(got.Entries), got.Truncated, len(tc.tape.Entries), tc.tape.Truncated)
			}
			for i, e := range got.Entries {
				w := tc.tape.Entries[i]
				if e.Kind != w.Kind || !bytes.Equal(e.Ask, w.Ask) || !bytes.Equal(e.Answer, w.Answer) || e.Value != w.Value {
					t.Errorf("entry %d = %+v, want %+v", i, e, w)
				}
			}
		})
	}
}

func TestUnmarshalRefusesWhatItDidNotWrite(t *testing.T) {
	good, err := sample().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"not gzip", []byte("WEFTTAPE\x01\x00\x00")},
		{"cut short", good[:len(good)/2]},
		{"another format", gz(t, []byte("NOTATAPE\x01\x00\x00"))},
		{"a later version", gz(t, []byte("WEFTTAPE\x02\x00\x00"))},
		{"unknown flags", gz(t, []byte("WEFTTAPE\x01\x04\x00"))},
		{"a count past the data", gz(t, []byte("WEFTTAPE\x01\x00\x7f"))},
		{"a length past the data", gz(t, []byte("WEFTTAPE\x01\x00\x01\x05info"))},
		{"no kind", gz(t, []byte("WEFTTAPE\x01\x00\x01\x00\x00\x00\x00"))},
		{"bytes left over", gz(t, []byte("WEFTTAPE\x01\x00\x00\x00"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tape.Unmarshal(tc.b); !errors.Is(err, tape.ErrMalformed) {
				t.Errorf("Unmarshal = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestRecorderCapsAndMarksTruncated(t *testing.T) {
	r := tape.NewRecorder(100)
	ask := []byte("0")
	for range 20 {
		r.Record(tape.Entry{Kind: tape.KindClock, Ask: ask, Value: 1})
	}
	got := r.Tape()
	if !got.Truncated || len(got.Entries) == 0 || len(got.Entries) >= 20 {
		t.Fatalf("%d entries, truncated %v; want some, truncated", len(got.Entries), got.Truncated)
	}
	// Nothing is kept after the first entry that did not fit, even one
	// that would.
	n := len(got.Entries)
	r.Record(tape.Entry{Kind: tape.KindCancelled})
	if len(r.Tape().Entries) != n {
		t.Error("an entry was kept after the tape was truncated")
	}
	// The recorder copies what it is given.
	buf := []byte("abc")
	r2 := tape.NewRecorder(0)
	r2.Record(tape.Entry{Kind: tape.KindRandom, Answer: buf})
	buf[0] = 'X'
	if string(r2.Tape().Entries[0].Answer) != "abc" {
		t.Error("the recorder kept the caller's memory")
	}
}

func TestPlayerAnswersInOrderAndNamesTheFirstDivergence(t *testing.T) {
	s := sample()
	for _, tc := range []struct {
		name   string
		calls  []tape.Entry // kind and ask of each call
		at     int          // the divergence's index, -1 for none
		trunc  bool
		wantOK int
	}{
		{"the same calls", s.Entries, -1, false, len(s.Entries)},
		{"another call", []tape.Entry{s.Entries[0], {Kind: tape.KindRandom, Ask: []byte("16")}}, 1, false, 1},
		{"the same call asking otherwise", []tape.Entry{s.Entries[0], {Kind: tape.KindClock, Ask: []byte("1")}}, 1, false, 1},
		{"past the end", append(append([]tape.Entry(nil), s.Entries...), tape.Entry{Kind: tape.KindCancelled}), len(s.Entries), false, len(s.Entries)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tape.NewPlayer(s)
			ok := 0
			var div *tape.Divergence
			for _, c := range tc.calls {
				e, err := p.Next(c.Kind, c.Ask)
				if err != nil {
					if !errors.As(err, &div) {
						t.Fatalf("Next: %v, want a *Divergence", err)
					}
					break
				}
				if e.Value != s.Entries[ok].Value || !bytes.Equal(e.Answer, s.Entries[ok].Answer) {
					t.Errorf("answer %d = %+v, want %+v", ok, e, s.Entries[ok])
				}
				ok++
			}
			if ok != tc.wantOK {
				t.Errorf("%d calls answered, want %d", ok, tc.wantOK)
			}
			switch {
			case tc.at < 0 && div != nil:
				t.Errorf("diverged: %v", div)
			case tc.at >= 0 && (div == nil || div.Index != tc.at):
				t.Errorf("divergence %v, want at %d", div, tc.at)
			}
		})
	}
	truncated := &tape.Tape{Entries: s.Entries[:1], Truncated: true}
	p := tape.NewPlayer(truncated)
	if _, err := p.Next(tape.KindInfo, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Next(tape.KindClock, []byte("0")); !errors.Is(err, tape.ErrTruncated) {
		t.Errorf("past a truncated tape's end: %v, want ErrTruncated", err)
	}
}

// gz is b compressed as Marshal compresses.
func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := writeGzip(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
