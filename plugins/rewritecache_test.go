package plugins

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/weftworks/weft/plugins/instrument"
)

// warnings counts the warnings logged through it.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.msgs)
}

func testOptions() instrument.Options { return instrumentOptions(Config{}.WithDefaults()) }

// testResult is a rewrite's result; the cache stores bytes and does not
// look at the module.
func testResult(tag string) *instrument.Result {
	return &instrument.Result{
		Wasm: append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte(tag), 1000)...),
		Imports: []instrument.Import{
			{Module: "weft", Name: "result", Kind: instrument.KindFunc},
			{Module: "wasi_snapshot_preview1", Name: "fd_write", Kind: instrument.KindFunc},
			{Module: "", Name: "", Kind: instrument.KindMemory},
		},
	}
}

func sameResult(t *testing.T, got, want *instrument.Result) {
	t.Helper()
	if !bytes.Equal(got.Wasm, want.Wasm) || !reflect.DeepEqual(got.Imports, want.Imports) {
		t.Fatalf("cache returned a module of %d bytes and imports %v, want %d bytes and %v", len(got.Wasm), got.Imports, len(want.Wasm), want.Imports)
	}
}

func TestRewriteCacheHitAndMiss(t *testing.T) {
	t.Parallel()
	w := &warnings{}
	c := newRewriteCache(filepath.Join(t.TempDir(), rewriteCacheDir), testOptions(), slog.New(w))
	v1, v2 := Hash([]byte("one")), Hash([]byte("two"))
	if _, ok := c.get(v1, c.key(v1)); ok {
		t.Fatal("hit in an empty cache")
	}
	want := testResult("one")
	c.put(v1, c.key(v1), want)
	got, ok := c.get(v1, c.key(v1))
	if !ok {
		t.Fatal("miss after put")
	}
	sameResult(t, got, want)
	if _, ok := c.get(v2, c.key(v2)); ok {
		t.Fatal("another version hit")
	}
	// A new Runtime (a restart) finds it with a cache of its own.
	again := newRewriteCache(c.dir, testOptions(), slog.New(w))
	if got, ok := again.get(v1, again.key(v1)); !ok {
		t.Fatal("miss after a restart")
	} else {
		sameResult(t, got, want)
	}
	if n := w.count(); n != 0 {
		t.Fatalf("%d warnings: %v", n, w.msgs)
	}
}

func TestRewriteCacheNil(t *testing.T) {
	t.Parallel()
	var c *rewriteCache // no CacheDir
	v := Hash([]byte("one"))
	c.put(v, c.key(v), testResult("one"))
	if _, ok := c.get(v, c.key(v)); ok {
		t.Fatal("a nil cache hit")
	}
}

// TestRewriteKeyCoversOptions changes each field of instrument.Options in
// turn: each must give another key, so that a record rewritten under other
// options is never found. A field of a kind this test cannot change fails
// it: the key prints Options with %#v, which suits plain values only.
func TestRewriteKeyCoversOptions(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), rewriteCacheDir)
	log := slog.New(slog.DiscardHandler)
	base := testOptions()
	v := Hash([]byte("one"))
	c := newRewriteCache(dir, base, log)
	c.put(v, c.key(v), testResult("one"))
	if c.key(v) != newRewriteCache(dir, base, log).key(v) {
		t.Fatal("the same options give two keys")
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		opt := base
		f := reflect.ValueOf(&opt).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(f.Uint() + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		default:
			t.Fatalf("instrument.Options.%s is a %s: make sure the rewrite cache's key covers it, then this test", typ.Field(i).Name, f.Kind())
		}
		other := newRewriteCache(dir, opt, log)
		if other.key(v) == c.key(v) {
			t.Errorf("changing instrument.Options.%s keeps the key", typ.Field(i).Name)
		}
		if _, ok := other.get(v, other.key(v)); ok {
			t.Errorf("changing instrument.Options.%s still finds the record", typ.Field(i).Name)
		}
	}
}

// TestRewriteRecordCoversResult fails when instrument.Result gains a field
// that encodeRecord does not store.
func TestRewriteRecordCoversResult(t *testing.T) {
	t.Parallel()
	if n := reflect.TypeOf(instrument.Result{}).NumField(); n != 2 {
		t.Fatalf("instrument.Result has %d fields; encodeRecord and decodeRecord store Wasm and Imports only", n)
	}
}

func TestRewriteCacheIgnoresCorruptRecords(t *testing.T) {
	t.Parallel()
	want := testResult("one")
	v := Hash([]byte("one"))
	other := Hash([]byte("two"))
	good := func(c *rewriteCache) []byte { return encodeRecord(c.key(v), want) }
	importsAt := recordHeader + 4 + 1 + 4 // the first import's module name
	tests := []struct {
		name    string
		corrupt func(c *rewriteCache, b []byte) []byte
	}{
		{"empty", func(_ *rewriteCache, b []byte) []byte { return nil }},
		{"header only", func(_ *rewriteCache, b []byte) []byte { return b[:recordHeader] }},
		{"torn", func(_ *rewriteCache, b []byte) []byte { return b[:len(b)/2] }},
		{"one byte short", func(_ *rewriteCache, b []byte) []byte { return b[:len(b)-1] }},
		{"one byte more", func(_ *rewriteCache, b []byte) []byte { return append(b, 0) }},
		{"magic", func(_ *rewriteCache, b []byte) []byte { b[7]++; return b }},
		{"key", func(_ *rewriteCache, b []byte) []byte { b[8] ^= 1; return b }},
		{"length", func(_ *rewriteCache, b []byte) []byte { b[40]--; return b }},
		{"checksum", func(_ *rewriteCache, b []byte) []byte { b[48] ^= 1; return b }},
		{"import", func(_ *rewriteCache, b []byte) []byte { b[importsAt] ^= 1; return b }},
		{"module", func(_ *rewriteCache, b []byte) []byte { b[len(b)-1] ^= 0x80; return b }},
		{"another version's record", func(c *rewriteCache, _ []byte) []byte { return encodeRecord(c.key(other), want) }},
		{"import count", func(_ *rewriteCache, b []byte) []byte {
			// A body whose checksum matches but whose counts lie.
			b[recordHeader+3] = 0x7f
			return resum(b)
		}},
		{"import length", func(_ *rewriteCache, b []byte) []byte {
			b[recordHeader+4+1+3] = 0x7f
			return resum(b)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &warnings{}
			c := newRewriteCache(filepath.Join(t.TempDir(), rewriteCacheDir), testOptions(), slog.New(w))
			key := c.key(v)
			if err := os.MkdirAll(c.dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.path(key), tt.corrupt(c, good(c)), 0o600); err != nil {
				t.Fatal(err)
			}
			if got, ok := c.get(v, key); ok {
				t.Fatalf("a corrupt record was trusted: %d bytes, imports %v", len(got.Wasm), got.Imports)
			}
			if n := w.count(); n != 1 {
				t.Fatalf("%d warnings, want 1 saying the record was ignored: %v", n, w.msgs)
			}
			// The load rewrites the module and replaces the record.
			c.put(v, key, want)
			got, ok := c.get(v, key)
			if !ok {
				t.Fatal("miss after the record was replaced")
			}
			sameResult(t, got, want)
		})
	}
}

// resum gives a record's body its checksum again, as if it had been
// written so.
func resum(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[48:], crc32.Checksum(b[recordHeader:], castagnoli))
	return b
}

func TestRewriteCacheConcurrentWriters(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), rewriteCacheDir)
	want := testResult("one")
	v := Hash([]byte("one"))
	w := &warnings{}
	var wg sync.WaitGroup
	// Each goroutine is a Runtime of its own, as in another process.
	for range 8 {
		wg.Go(func() {
			c := newRewriteCache(dir, testOptions(), slog.New(w))
			for range 20 {
				if got, ok := c.get(v, c.key(v)); ok && (!bytes.Equal(got.Wasm, want.Wasm) || !reflect.DeepEqual(got.Imports, want.Imports)) {
					t.Error("a reader saw a record that differs from the one written")
					return
				}
				c.put(v, c.key(v), want)
			}
		})
	}
	wg.Wait()
	if n := w.count(); n != 0 {
		t.Fatalf("%d warnings: %v", n, w.msgs)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("cache holds %v, want only the record (no temporary files)", names)
	}
	c := newRewriteCache(dir, testOptions(), slog.New(w))
	got, ok := c.get(v, c.key(v))
	if !ok {
		t.Fatal("miss after the writers finished")
	}
	sameResult(t, got, want)
}

func TestRewriteCacheUnwritableWarnsOnce(t *testing.T) {
	t.Parallel()
	// A file where the directory should be: nothing can be written under
	// it, whoever runs the test (root ignores permissions).
	parent := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(parent, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w := &warnings{}
	c := newRewriteCache(filepath.Join(parent, rewriteCacheDir), testOptions(), slog.New(w))
	for i := range 3 {
		v := Hash(fmt.Appendf(nil, "version %d", i))
		c.put(v, c.key(v), testResult("one"))
		if _, ok := c.get(v, c.key(v)); ok {
			t.Fatal("hit in a cache that cannot be written")
		}
	}
	if n := w.count(); n != 1 || !strings.Contains(w.msgs[0], "cannot write the rewrite cache") {
		t.Fatalf("warnings %v, want one saying the cache cannot be written", w.msgs)
	}
}
