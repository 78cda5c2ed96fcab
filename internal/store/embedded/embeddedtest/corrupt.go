// Package embeddedtest has what the tests of the embedded store and of its
// users share: a way to corrupt a Pebble store on disk.
package embeddedtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// CorruptTable flips the bytes of marker in the one table of the Pebble
// store in dir that holds it, so that the checksum of its block fails. The
// marker must share no four bytes with the rest of the store: Pebble
// compresses blocks with Snappy, which copies repeats of four bytes or
// more. It fails the test unless exactly one table holds marker, once.
func CorruptTable(t testing.TB, dir string, marker []byte) {
	t.Helper()
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, table := range tables {
		data, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(data, marker)
		if i < 0 {
			continue
		}
		if bytes.Count(data, marker) != 1 {
			t.Fatalf("%s holds %q more than once", table, marker)
		}
		found++
		for j := range marker {
			data[i+j] ^= 0xFF
		}
		if err := os.WriteFile(table, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if found != 1 {
		t.Fatalf("%d tables of %s (%v) hold %q, want 1", found, dir, tables, marker)
	}
}
