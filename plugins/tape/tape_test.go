package tape_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/weftworks/weft/plugins/tape"
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
		{"fresh", func() *tape.Tape { s := sample(); s.Fresh = true; return s }()},
		{"fresh and truncated", func() *tape.Tape { s := sample(); s.Fresh, s.Truncated = true, true; return s }()},
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
			if got.Truncated != tc.tape.Truncated || got.Fresh != tc.tape.Fresh || len(got.Entries) != len(tc.tape.Entries) {
				t.Fatalf("got %d entries truncated %v fresh %v, want %d, %v, %v", len(got.Entries), got.Truncated, got.Fresh,
					len(tc.tape.Entries), tc.tape.Truncated, tc.tape.Fresh)
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

// TestUnmarshalReadsTapesWrittenBeforeFresh: a tape whose flags have no
// fresh bit (all tapes written before it existed) decodes as not fresh.
func TestUnmarshalReadsTapesWrittenBeforeFresh(t *testing.T) {
	for _, tc := range []struct {
		name             string
		b                []byte
		truncated, fresh bool
	}{
		{"old, whole", gz(t, []byte("WEFTTAPE\x01\x00\x01\x04info\x00\x02{}\x00")), false, false},
		{"old, truncated", gz(t, []byte("WEFTTAPE\x01\x01\x01\x04info\x00\x02{}\x00")), true, false},
		{"fresh", gz(t, []byte("WEFTTAPE\x01\x02\x01\x04info\x00\x02{}\x00")), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tape.Unmarshal(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if got.Truncated != tc.truncated || got.Fresh != tc.fresh || len(got.Entries) != 1 || string(got.Entries[0].Answer) != "{}" {
				t.Errorf("decoded %+v, want truncated %v fresh %v and one info entry", got, tc.truncated, tc.fresh)
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
	s.Fresh = true // matched exactly (see TestPlayerLooseOnATapeThatIsNotFresh)
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

// TestCarriedStateHint: a divergence on a tape that is not fresh, and a
// replay whose result differs from one, say that the recorded instance
// carried state from earlier calls; on a fresh tape they do not.
func TestCarriedStateHint(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		s := sample()
		s.Fresh = fresh
		p := tape.NewPlayer(s)
		if p.Fresh() != fresh {
			t.Errorf("Player.Fresh() = %v, want %v", p.Fresh(), fresh)
		}
		_, err := p.Next(tape.KindCancelled, nil)
		var d *tape.Divergence
		if !errors.As(err, &d) || d.Carried == fresh {
			t.Fatalf("fresh %v: divergence %#v, want Carried %v", fresh, err, !fresh)
		}
		hinted := strings.Contains(err.Error(), "carried state from earlier calls")
		if errors.Is(err, tape.ErrCarriedState) != !fresh || hinted != !fresh {
			t.Errorf("fresh %v: %q matches ErrCarriedState %v", fresh, err, errors.Is(err, tape.ErrCarriedState))
		}
		if errors.Is(err, tape.ErrTruncated) {
			t.Errorf("fresh %v: %q matches ErrTruncated", fresh, err)
		}
		derr := s.Differs("output {\"a\":1}, recorded {\"a\":2}")
		if !errors.Is(derr, tape.ErrDiffers) || errors.Is(derr, tape.ErrCarriedState) != !fresh || !strings.Contains(derr.Error(), `{"a":2}`) {
			t.Errorf("fresh %v: Differs = %q", fresh, derr)
		}
	}
	cut := &tape.Tape{Truncated: true}
	_, err := tape.NewPlayer(cut).Next(tape.KindInfo, nil)
	if !errors.Is(err, tape.ErrTruncated) || !errors.Is(err, tape.ErrCarriedState) {
		t.Errorf("past the end of a truncated tape that is not fresh: %v", err)
	}
	r := tape.NewRecorder(0)
	r.MarkFresh()
	if !r.Tape().Fresh {
		t.Error("MarkFresh did not mark the tape fresh")
	}
}

// TestPlayerLooseOnATapeThatIsNotFresh: on a tape that is not fresh, a
// clock read the tape does not hold is answered with that clock's latest
// reading (or its next one), readings the guest does not ask for are
// passed over, a seed's worth of random bytes it does not hold is zeros,
// and Left counts no clock reading; never endlessly, and never on a
// fresh tape.
func TestPlayerLooseOnATapeThatIsNotFresh(t *testing.T) {
	clock := func(id string, v int64) tape.Entry {
		return tape.Entry{Kind: tape.KindClock, Ask: []byte(id), Value: v}
	}
	poll := tape.Entry{Kind: tape.KindPoll, Ask: []byte("clock id=1 flags=0 userdata=0"), Answer: make([]byte, 32)}
	hb := tape.Entry{Kind: tape.KindHeartbeat, Ask: []byte("{}")}
	tp := &tape.Tape{Entries: []tape.Entry{clock("1", 10), clock("1", 11), poll, clock("0", 500), clock("1", 20), clock("1", 21), hb, clock("1", 30)}}

	p := tape.NewPlayer(tp)
	want := func(e tape.Entry, err error, v int64) {
		t.Helper()
		if err != nil || e.Value != v {
			t.Fatalf("answered %+v, %v; want %d", e, err, v)
		}
	}
	e, err := p.Clock([]byte("1"))
	want(e, err, 10)
	e, err = p.Clock([]byte("1"))
	want(e, err, 11)
	e, err = p.Clock([]byte("1")) // one more than recorded: the latest again
	want(e, err, 11)
	if _, err := p.Next(poll.Kind, poll.Ask); err != nil {
		t.Fatal(err)
	}
	e, err = p.Clock([]byte("1")) // passes over clock 0
	want(e, err, 20)
	if _, err := p.Next(hb.Kind, hb.Ask); err != nil { // passes over clock 1 at 21
		t.Fatal(err)
	}
	e, err = p.Clock([]byte("0")) // passed over: its latest
	want(e, err, 500)
	if p.Left() != 0 {
		t.Errorf("Left() = %d with only a clock reading left", p.Left())
	}
	e, err = p.Random([]byte("16"), 16) // a seed the tape does not hold
	if err != nil || len(e.Answer) != 16 || !bytes.Equal(e.Answer, make([]byte, 16)) {
		t.Errorf("a loose seed: %+v, %v", e, err)
	}
	if _, err := p.Random([]byte("128"), 128); !errors.As(err, new(*tape.Divergence)) {
		t.Errorf("128 random bytes the tape does not hold: %v, want a divergence", err)
	}
	e, err = p.Clock([]byte("1"))
	want(e, err, 30)
	var err2 error
	for range 100 { // a guest waiting for its clock to move
		if _, err2 = p.Clock([]byte("1")); err2 != nil {
			break
		}
	}
	if !errors.Is(err2, tape.ErrCarriedState) {
		t.Errorf("endless reads of a clock that does not move: %v, want a divergence", err2)
	}

	// A clock the tape never read diverges.
	if _, err := tape.NewPlayer(tp).Clock([]byte("2")); !errors.As(err, new(*tape.Divergence)) {
		t.Errorf("a clock the tape never read: %v", err)
	}
	// The same calls on a fresh tape are matched exactly.
	fresh := *tp
	fresh.Fresh = true
	p = tape.NewPlayer(&fresh)
	p.Clock([]byte("1"))
	p.Clock([]byte("1"))
	if _, err := p.Clock([]byte("1")); !errors.As(err, new(*tape.Divergence)) {
		t.Errorf("a clock read more than recorded on a fresh tape: %v", err)
	}
	if _, err := tape.NewPlayer(&fresh).Random([]byte("16"), 16); !errors.As(err, new(*tape.Divergence)) {
		t.Errorf("random bytes a fresh tape does not hold: %v", err)
	}
	if n := tape.NewPlayer(&fresh).Left(); n != len(fresh.Entries) {
		t.Errorf("Left() of a fresh tape = %d, want %d", n, len(fresh.Entries))
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

// TestClockOrAnswersAClockTheTapeNeverRead: on a tape that is not fresh, a
// clock the recording never read gets a live reading, and that reading
// again after; a fresh tape, or no live clock, diverges.
func TestClockOrAnswersAClockTheTapeNeverRead(t *testing.T) {
	reads := 0
	live := func() int64 { reads++; return 1000 + int64(reads) }
	notFresh := &tape.Tape{Entries: []tape.Entry{{Kind: tape.KindInfo}}}
	p := tape.NewPlayer(notFresh)
	for i := range 3 {
		e, err := p.ClockOr([]byte("1"), live)
		if err != nil || e.Value != 1001 {
			t.Fatalf("read %d: %+v, %v; want the first live reading, 1001", i, e, err)
		}
	}
	if reads != 1 {
		t.Errorf("live read %d times, want once", reads)
	}
	if _, err := p.Next(tape.KindInfo, nil); err != nil {
		t.Errorf("the tape's own call after the loose reads: %v", err)
	}
	if _, err := tape.NewPlayer(notFresh).ClockOr([]byte("1"), nil); !errors.As(err, new(*tape.Divergence)) {
		t.Errorf("no live clock: %v, want a divergence", err)
	}
	fresh := &tape.Tape{Fresh: true, Entries: notFresh.Entries}
	if _, err := tape.NewPlayer(fresh).ClockOr([]byte("1"), live); !errors.As(err, new(*tape.Divergence)) {
		t.Errorf("a fresh tape: %v, want a divergence", err)
	}
}
