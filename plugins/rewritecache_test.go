package plugins

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/instrument"
	"github.com/weftworks/weft/plugins/call"
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

// memBlobs is a blob store in memory.
type memBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (b *memBlobs) Put(_ context.Context, hash string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[hash] = data
	return nil
}

func (b *memBlobs) Get(_ context.Context, hash string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if data, ok := b.m[hash]; ok {
		return data, nil
	}
	return nil, ErrNotFound
}

func (b *memBlobs) Delete(_ context.Context, hash string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, hash)
	return nil
}

// echoPlugin is the smallest valid plugin: its one activity, echo,
// returns its input. The manifest at 1024 is 32 bytes long.
const echoPlugin = `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"activities\":[{\"name\":\"echo\"}]}")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32)
    (call $result (i32.const 1024) (i32.const 32)) (i32.const 0))
  (func (export "weft_invoke") (param $p i32) (param $a i32) (param $n i32) (result i32)
    (call $result (i32.add (local.get $p) (local.get $a)) (local.get $n)) (i32.const 0)))`

// wat assembles a module with wabt's wat2wasm (internal/testplugins does
// the same, but this package's own tests cannot import it).
func wat(t *testing.T, text string) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("wat2wasm", "-o", out, in).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm (Debian package wabt): %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A load whose rewrite is cached does not wait for a compile in progress:
// a restarting host loads its versions in parallel.
func TestCachedLoadTakesNoCompileToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := Config{CacheDir: t.TempDir(), MaxCompiles: 1, Logger: slog.New(slog.DiscardHandler)}
	blobs := &memBlobs{m: map[string][]byte{}}
	wasm := wat(t, echoPlugin)
	first, err := New(ctx, cfg, blobs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := first.Load(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}

	second, err := New(ctx, cfg, blobs)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close(ctx)
	second.compiles <- struct{}{} // the only token, as a compile in progress holds it
	// The deadline only keeps a regression from hanging the test.
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := second.Module(lctx, m.Version); err != nil {
		t.Fatalf("loading a cached version while another compiles: %v", err)
	}
	out, err := second.Invoke(ctx, m.Version, call.Call{Activity: "echo", Input: []byte(`"x"`)})
	if err != nil || string(out) != `"x"` {
		t.Fatalf("echo: %s, %v", out, err)
	}
	<-second.compiles
}
