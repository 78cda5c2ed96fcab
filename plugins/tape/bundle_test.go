package tape_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/weftworks/weft/plugins/tape"
)

// sampleBundle returns a bundle of a fake module and sampleAttempt.
func sampleBundle(t testing.TB) *tape.Bundle {
	t.Helper()
	a, err := sampleAttempt().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return &tape.Bundle{Module: []byte("\x00asm\x01\x00\x00\x00 a module"), Attempt: a}
}

// TestBundleRoundTrip: a bundle decodes to its module and attempt; a
// damaged module, a later version, a bare envelope, trailing bytes and
// a cut are refused as malformed, saying what; Marshal refuses a bundle
// without a module or with an envelope that does not decode.
func TestBundleRoundTrip(t *testing.T) {
	t.Parallel()
	b := sampleBundle(t)
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, a, err := tape.UnmarshalBundle(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Module, b.Module) || !bytes.Equal(got.Attempt, b.Attempt) || a.Activity != "fail" || a.FailureCode != "busy" ||
		got.ModuleSum() != b.ModuleSum() || len(got.ModuleSum()) != 64 {
		t.Fatalf("round trip: %+v, %+v", got, a)
	}

	damaged := bytes.Clone(data)
	damaged[bytes.Index(damaged, []byte("a module"))] ^= 1
	later := bytes.Clone(data)
	later[len("WEFTBNDL")] = 2
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"damaged module", damaged, "damaged"},
		{"later version", later, "version 2"},
		{"bare envelope", b.Attempt, "not a bundle"},
		{"trailing bytes", append(bytes.Clone(data), 0), "after the attempt"},
		{"cut", data[:len(data)-3], "past the end"},
		{"header only", data[:len("WEFTBNDL")+1], "shorter than its header"},
	} {
		_, _, err := tape.UnmarshalBundle(c.data)
		if !errors.Is(err, tape.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrMalformed saying %q", c.name, err, c.want)
		}
	}

	for _, bad := range []*tape.Bundle{{Attempt: b.Attempt}, {Module: b.Module}, {Module: b.Module, Attempt: []byte("not an envelope")}} {
		if _, err := bad.Marshal(); err == nil {
			t.Errorf("Marshal of %d module bytes and %d attempt bytes: no error", len(bad.Module), len(bad.Attempt))
		}
	}
}

// FuzzUnmarshalBundle: any bytes either decode to a bundle that encodes
// back to the same bytes, or are refused as malformed; never a panic.
func FuzzUnmarshalBundle(f *testing.F) {
	b := sampleBundle(f)
	good, err := b.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte("WEFTBNDL\x01"))
	f.Add(append([]byte("WEFTBNDL\x01"), make([]byte, 32+2)...))
	f.Add(b.Attempt)
	f.Fuzz(func(t *testing.T, data []byte) {
		got, _, err := tape.UnmarshalBundle(data)
		if err != nil {
			if !errors.Is(err, tape.ErrMalformed) {
				t.Fatalf("an error that is not ErrMalformed: %v", err)
			}
			return
		}
		again, err := got.Marshal()
		if err != nil {
			t.Fatalf("a decoded bundle does not encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("re-encoded bundle differs")
		}
	})
}
