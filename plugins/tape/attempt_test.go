package tape_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/weftworks/weft/plugins/tape"
)

// sampleAttempt is a failed attempt with a tape.
func sampleAttempt() *tape.Attempt {
	return &tape.Attempt{
		Activity: "fail", Plugin: "kit", PluginVersion: "ab12",
		Input: []byte(`{"code":"busy"}`), FailureCode: "busy", FailureMessage: "try later",
		Tape: sample(),
	}
}

// TestAttemptRoundTrip: an attempt, with or without a tape, completed or
// failed, decodes to what was encoded.
func TestAttemptRoundTrip(t *testing.T) {
	t.Parallel()
	for _, a := range []*tape.Attempt{
		sampleAttempt(),
		{Activity: "echo", Plugin: "kit", PluginVersion: "v", Input: []byte(`1`), Output: []byte(`{"ok":true}`), Tape: &tape.Tape{Truncated: true}},
		{Activity: "echo"},
	} {
		b, err := a.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := tape.UnmarshalAttempt(b)
		if err != nil {
			t.Fatalf("%s: %v", a.Activity, err)
		}
		if back.Activity != a.Activity || back.Plugin != a.Plugin || back.PluginVersion != a.PluginVersion ||
			!bytes.Equal(back.Input, a.Input) || !bytes.Equal(back.Output, a.Output) ||
			back.FailureCode != a.FailureCode || back.FailureMessage != a.FailureMessage {
			t.Errorf("round trip: %+v, want %+v", back, a)
		}
		switch {
		case a.Tape == nil && back.Tape != nil:
			t.Errorf("%s: a tape from nowhere: %+v", a.Activity, back.Tape)
		case a.Tape != nil && (back.Tape == nil || back.Tape.Truncated != a.Tape.Truncated || len(back.Tape.Entries) != len(a.Tape.Entries)):
			t.Errorf("%s: tape %+v, want %+v", a.Activity, back.Tape, a.Tape)
		case a.Tape != nil && len(a.Tape.Entries) > 0 && !reflect.DeepEqual(back.Tape.Entries, a.Tape.Entries):
			t.Errorf("%s: entries %+v, want %+v", a.Activity, back.Tape.Entries, a.Tape.Entries)
		}
	}
}

// TestAttemptRefusesOthers: a bare tape, garbage, a later version, cut or
// padded bytes are refused as malformed.
func TestAttemptRefusesOthers(t *testing.T) {
	t.Parallel()
	bare, err := sample().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	good, err := sampleAttempt().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	raw := inflate(t, good)
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		if err := writeGzip(&buf, b); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	later := bytes.Clone(raw)
	later[8] = 2
	flags := bytes.Clone(raw)
	flags[9] = 0x81
	for name, b := range map[string][]byte{
		"a bare tape":    bare,
		"not gzip":       []byte("WEFTATTM\x01\x00"),
		"later version":  gz(later),
		"unknown flags":  gz(flags),
		"cut short":      gz(raw[:len(raw)-3]),
		"padded":         gz(append(bytes.Clone(raw), 0)),
		"tape unflagged": gz([]byte("WEFTATTM\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01x")),
		"flag no tape":   gz([]byte("WEFTATTM\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00")),
	} {
		if a, err := tape.UnmarshalAttempt(b); !errors.Is(err, tape.ErrMalformed) {
			t.Errorf("%s: %+v, %v; want ErrMalformed", name, a, err)
		}
	}
}

// inflate returns b ungzipped.
func inflate(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzUnmarshalAttempt: any bytes, gzipped or not, decode to an attempt
// that encodes back to what decodes the same, or fail with ErrMalformed;
// never a panic.
func FuzzUnmarshalAttempt(f *testing.F) {
	good, err := sampleAttempt().Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, false)
	f.Add([]byte("WEFTATTM\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"), true)
	f.Add([]byte("WEFTATTM\x01\x00\x04fail\x03kit\x00\x02{}\x00\x04busy\x00\x00"), true)
	f.Add([]byte("WEFTATTM\x01\x01\x00\x00\x00\x00\x00\x00\x00\x05WEFTT"), true)
	f.Fuzz(func(t *testing.T, b []byte, compress bool) {
		if compress {
			var buf bytes.Buffer
			if err := writeGzip(&buf, b); err != nil {
				t.Fatal(err)
			}
			b = buf.Bytes()
		}
		a, err := tape.UnmarshalAttempt(b)
		if err != nil {
			if !errors.Is(err, tape.ErrMalformed) {
				t.Fatalf("an error that is not ErrMalformed: %v", err)
			}
			return
		}
		again, err := a.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := tape.UnmarshalAttempt(again)
		if err != nil {
			t.Fatalf("a decoded attempt does not decode again: %v", err)
		}
		if back.Activity != a.Activity || back.Plugin != a.Plugin || back.PluginVersion != a.PluginVersion ||
			!bytes.Equal(back.Input, a.Input) || !bytes.Equal(back.Output, a.Output) ||
			back.FailureCode != a.FailureCode || back.FailureMessage != a.FailureMessage || (back.Tape == nil) != (a.Tape == nil) {
			t.Fatalf("round trip changed the attempt: %+v vs %+v", back, a)
		}
		if a.Tape != nil && (len(back.Tape.Entries) != len(a.Tape.Entries) || back.Tape.Truncated != a.Tape.Truncated) {
			t.Fatalf("round trip changed the tape")
		}
	})
}
