package embedded

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// engineStore opens an empty store of engine e, closed when t ends.
func engineStore(t *testing.T, e Engine) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "weft"), Config{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func forEachEngine(t *testing.T, test func(t *testing.T, e Engine)) {
	for _, e := range []Engine{EngineBolt, EnginePebble} {
		t.Run("engine="+string(e), func(t *testing.T) {
			t.Parallel()
			test(t, e)
		})
	}
}

// TestKVSeam: both engines answer the seam's calls alike: buckets apart
// (names that prefix each other included), cursors' moves and ends,
// values that stay valid, empty values, sequences, rollback, and reads of
// a write transaction seeing its own writes.
func TestKVSeam(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e Engine) {
		db := engineStore(t, e).db
		// bStim ("stimuli") and bStimQueue ("stimuli_queued"): one name
		// prefixes the other.
		err := db.update(func(tx kvTx) error {
			if !tx.Writable() {
				t.Error("an update's transaction is not writable")
			}
			a, b := tx.Bucket(bStim), tx.Bucket(bStimQueue)
			for _, k := range []string{"b", "d", "f"} {
				if err := a.Put([]byte(k), []byte("a"+k)); err != nil {
					return err
				}
			}
			if err := a.Put([]byte("empty"), nil); err != nil {
				return err
			}
			if err := b.Put([]byte("a"), []byte("b-a")); err != nil {
				return err
			}
			if got := a.Get([]byte("d")); string(got) != "ad" {
				t.Errorf("a write transaction reads %q for its own write", got)
			}
			if !a.Has([]byte("d")) || !a.Has([]byte("empty")) || a.Has([]byte("c")) || b.Has([]byte("d")) {
				t.Error("Has: want d and empty in a, c in neither, d not in b")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		errRollback := errors.New("roll back")
		if err := db.update(func(tx kvTx) error {
			_ = tx.Bucket(bStim).Put([]byte("z"), []byte("never"))
			_ = tx.Bucket(bStim).Delete([]byte("b"))
			return errRollback
		}); !errors.Is(err, errRollback) {
			t.Fatalf("update returned %v, want fn's error", err)
		}
		err = db.view(func(tx kvTx) error {
			if tx.Writable() {
				t.Error("a view's transaction is writable")
			}
			if tx.Bucket([]byte("no such bucket")) != nil {
				t.Error("a missing bucket exists")
			}
			a := tx.Bucket(bStim)
			if v := a.Get([]byte("empty")); v == nil || len(v) != 0 {
				t.Errorf("Get of an empty value = %#v, want empty, not nil", v)
			}
			if v := a.Get([]byte("z")); v != nil {
				t.Errorf("a rolled back write reads %q", v)
			}
			if err := a.Put([]byte("x"), nil); err == nil {
				t.Error("Put in a read transaction succeeded")
			}
			c := a.Cursor()
			var moves []string
			note := func(k, v []byte) {
				if k == nil {
					moves = append(moves, "nil")
				} else {
					moves = append(moves, string(k)+"="+string(v))
				}
			}
			k1, v1 := c.First()
			note(k1, v1)
			note(c.Next())
			note(c.Seek([]byte("c")))
			note(c.Seek([]byte("zz")))
			note(c.Prev())
			note(c.Last())
			note(c.Prev())
			note(c.Seek([]byte("a")))
			note(c.Prev())
			note(c.Next())
			if string(k1) != "b" || string(v1) != "ab" {
				t.Errorf("the first key and value changed as the cursor moved: %q=%q", k1, v1)
			}
			want := "b=ab d=ad d=ad nil f=af f=af empty= b=ab nil d=ad"
			if got := strings.Join(moves, " "); got != want {
				t.Errorf("cursor moves: %s, want %s", got, want)
			}
			var keys []string
			if err := tx.Bucket(bStimQueue).ForEach(func(k, v []byte) error {
				keys = append(keys, string(k)+"="+string(v))
				return nil
			}); err != nil {
				return err
			}
			if fmt.Sprint(keys) != "[a=b-a]" {
				t.Errorf("the other bucket holds %v", keys)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for range 3 {
			err := db.update(func(tx kvTx) error {
				n, err := tx.Bucket(bInbox).NextSequence()
				seqs = append(seqs, n)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(seqs) != "[1 2 3]" {
			t.Errorf("NextSequence gave %v", seqs)
		}
		names := 0
		_ = db.view(func(tx kvTx) error {
			names = len(bucketNames(tx))
			return nil
		})
		if names != len(allBuckets) {
			t.Errorf("%d buckets, want %d", names, len(allBuckets))
		}
	})
}

// TestPebbleViewIsASnapshot: a read transaction sees the state of one
// moment, whatever commits meanwhile (bbolt's do by design).
func TestPebbleViewIsASnapshot(t *testing.T) {
	t.Parallel()
	db := engineStore(t, EnginePebble).db
	put := func(k, v string) error {
		return db.update(func(tx kvTx) error { return tx.Bucket(bMeta).Put([]byte(k), []byte(v)) })
	}
	if err := put("k", "old"); err != nil {
		t.Fatal(err)
	}
	err := db.view(func(tx kvTx) error {
		b := tx.Bucket(bMeta)
		before := string(b.Get([]byte("k")))
		c := b.Cursor()
		if err := put("k", "new"); err != nil {
			return err
		}
		if err := put("k2", "new"); err != nil {
			return err
		}
		after := string(b.Get([]byte("k")))
		var keys []string
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			keys = append(keys, string(k))
		}
		if before != "old" || after != "old" || fmt.Sprint(keys) != "[k schema]" {
			t.Errorf("a read transaction read %q, then %q, and keys %v; want old twice, and k and schema", before, after, keys)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPebbleGroupCommitIsolatesAFailingWrite: the batcher's contract on
// Pebble: writes that arrive while one commits share the next transaction,
// and one of them failing fails alone; the others are committed, its own
// writes are not.
func TestPebbleGroupCommitIsolatesAFailingWrite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weft")
	s, err := Open(path, Config{Engine: EnginePebble})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := t.Context()
	put := func(k string) func(tx kvTx) error {
		return func(tx kvTx) error { return tx.Bucket(bMeta).Put([]byte(k), []byte("v")) }
	}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first := make(chan error, 1)
	go func() {
		first <- s.write(ctx, func(tx kvTx) error {
			once.Do(func() { close(started) })
			<-release
			return put("w0")(tx)
		})
	}()
	<-started
	errBad := errors.New("bad write")
	errs := make(chan error, 5)
	for i := 1; i <= 5; i++ {
		go func() {
			errs <- s.write(ctx, func(tx kvTx) error {
				if err := put(fmt.Sprint("w", i))(tx); err != nil {
					return err
				}
				if i == 3 {
					return errBad
				}
				return nil
			})
		}()
	}
	for deadline := time.Now().Add(time.Minute); ; {
		s.batch.mu.Lock()
		queued := 0
		for _, bt := range s.batch.waiting {
			queued += len(bt.calls)
		}
		s.batch.mu.Unlock()
		if queued == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued behind the first, want 5", queued)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	failed := 0
	for range 5 {
		switch err := <-errs; {
		case errors.Is(err, errBad):
			failed++
			if !strings.Contains(err.Error(), path) {
				t.Errorf("the failed write's error %v does not name the store", err)
			}
		case err != nil:
			t.Errorf("a write of the batch failed: %v", err)
		}
	}
	if failed != 1 {
		t.Errorf("%d writes failed, want the bad one only", failed)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Config{Engine: EnginePebble})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.view(func(tx kvTx) error {
		for i := range 6 {
			k := fmt.Sprint("w", i)
			if got, want := tx.Bucket(bMeta).Get([]byte(k)) != nil, i != 3; got != want {
				t.Errorf("after reopening, %s is there: %v, want %v", k, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPebbleNewerSchema: a Pebble store of another schema version is
// refused, naming it.
func TestPebbleNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weft")
	s, err := Open(path, Config{Engine: EnginePebble})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.update(func(tx kvTx) error { return tx.Bucket(bMeta).Put([]byte("schema"), []byte("4")) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Config{Engine: EnginePebble}); err == nil ||
		!strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `schema version "4"`) {
		t.Errorf("Open of a newer schema: %v", err)
	}
}

// TestPebbleLogger: Pebble's messages go to the store's logger; Fatalf
// stops (exit, and a panic should exit return).
func TestPebbleLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	code := -1
	l := pebbleLogger{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), exit: func(c int) { code = c }}
	l.Infof("replayed %d keys", 3)
	l.Errorf("background error: %s", "disk full")
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("Fatalf returned")
			}
		}()
		l.Fatalf("corrupt %s", "manifest")
	}()
	if code != 1 {
		t.Errorf("Fatalf exited with %d, want 1", code)
	}
	for _, want := range []string{
		`level=DEBUG msg="pebble: replayed 3 keys"`,
		`level=ERROR msg="pebble: background error: disk full"`,
		`level=ERROR msg="pebble: fatal: corrupt manifest"`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, &buf)
		}
	}
}
