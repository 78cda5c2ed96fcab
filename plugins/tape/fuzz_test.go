package tape_test

import (
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/weftworks/weft/plugins/tape"
)

// writeGzip writes b gzipped to w.
func writeGzip(w *bytes.Buffer, b []byte) error {
	zw := gzip.NewWriter(w)
	if _, err := zw.Write(b); err != nil {
		return err
	}
	return zw.Close()
}

// FuzzUnmarshal: any bytes, gzipped or not, decode to a tape that
// encodes back to what decodes the same, or fail with ErrMalformed;
// never a panic.
func FuzzUnmarshal(f *testing.F) {
	good, err := sample().Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, false)
	fresh := sample()
	fresh.Fresh, fresh.Truncated = true, true
	goodFresh, err := fresh.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(goodFresh, false)
	f.Add([]byte("WEFTTAPE\x01\x02\x01\x04info\x00\x02{}\x00"), true)
	f.Add([]byte("WEFTTAPE\x01\x03\x00"), true)
	f.Add([]byte("WEFTTAPE\x01\x06\x00"), true)
	f.Add([]byte("WEFTTAPE\x01\x00\x00"), true)
	f.Add([]byte("WEFTTAPE\x01\x01\x01\x04info\x00\x02{}\x00"), true)
	f.Fuzz(func(t *testing.T, b []byte, compress bool) {
		if compress {
			var buf bytes.Buffer
			if err := writeGzip(&buf, b); err != nil {
				t.Fatal(err)
			}
			b = buf.Bytes()
		}
		tp, err := tape.Unmarshal(b)
		if err != nil {
			return
		}
		again, err := tp.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := tape.Unmarshal(again)
		if err != nil {
			t.Fatalf("a decoded tape does not decode again: %v", err)
		}
		if back.Truncated != tp.Truncated || back.Fresh != tp.Fresh || len(back.Entries) != len(tp.Entries) {
			t.Fatalf("round trip changed the tape: %d/%v/%v vs %d/%v/%v", len(back.Entries), back.Truncated, back.Fresh, len(tp.Entries), tp.Truncated, tp.Fresh)
		}
		for i := range tp.Entries {
			a, c := tp.Entries[i], back.Entries[i]
			if a.Kind != c.Kind || !bytes.Equal(a.Ask, c.Ask) || !bytes.Equal(a.Answer, c.Answer) || a.Value != c.Value {
				t.Fatalf("entry %d changed: %+v vs %+v", i, a, c)
			}
		}
	})
}
