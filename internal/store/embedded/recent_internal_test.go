package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRecent: the rules of the engine's recent values, step by step: what
// a read transaction of a generation may take, what a commit in progress
// hides, what a failed commit, a delete and an oversized value leave, and
// the bounds.
func TestRecent(t *testing.T) {
	t.Parallel()
	w := func(k, v string) recentWrite {
		if v == "<del>" {
			return recentWrite{key: k}
		}
		return recentWrite{key: k, v: []byte(v)}
	}
	type read struct {
		key    string
		gen    uint64
		want   string
		wantOK bool
	}
	type step struct {
		name string
		// commit, when set, is begun and ended (committed unless failed);
		// inside, the reads run between the two.
		commit []recentWrite
		failed bool
		// fill is a value a write transaction read from Pebble.
		fill   *recentWrite
		inside []read
		after  []read
	}
	big := strings.Repeat("x", recentMaxValue+1)
	steps := []step{
		{name: "empty", after: []read{{key: "a", gen: exactGen}}},
		{name: "commit 1 writes a", commit: []recentWrite{w("a", "a1")},
			inside: []read{{key: "a", gen: exactGen}},
			after: []read{
				{key: "a", gen: 1, want: "a1", wantOK: true},
				{key: "a", gen: 0}, // its snapshot predates commit 1
				{key: "a", gen: exactGen, want: "a1", wantOK: true},
			}},
		{name: "commit 2 writes a twice and b", commit: []recentWrite{w("a", "a2"), w("b", "b2"), w("a", "a2'")},
			inside: []read{
				{key: "a", gen: 1}, // being committed: the snapshot may hold a2'
				{key: "b", gen: 1},
			},
			after: []read{
				{key: "a", gen: 2, want: "a2'", wantOK: true},
				{key: "a", gen: 1}, // a2' is newer than generation 1
				{key: "b", gen: 2, want: "b2", wantOK: true},
			}},
		{name: "a failed commit forgets its keys", commit: []recentWrite{w("a", "a3")}, failed: true,
			after: []read{{key: "a", gen: exactGen}, {key: "b", gen: exactGen, want: "b2", wantOK: true}}},
		{name: "a delete is remembered as absent", commit: []recentWrite{w("b", "<del>")},
			after: []read{{key: "b", gen: 4, wantOK: true}, {key: "b", gen: 3}}},
		{name: "an oversized value is not kept", commit: []recentWrite{w("c", "c5"), {key: "c", forget: true}},
			after: []read{{key: "c", gen: exactGen}}},
		{name: "a value read by a write transaction is kept since the current generation", fill: &recentWrite{key: "d", v: []byte("d5")},
			after: []read{{key: "d", gen: 5, want: "d5", wantOK: true}, {key: "d", gen: 4}}},
		{name: "a key a write transaction found absent is kept absent", fill: &recentWrite{key: "e"},
			after: []read{{key: "e", gen: 5, wantOK: true}, {key: "e", gen: 4}}},
		{name: "a read value does not replace a remembered one", fill: &recentWrite{key: "d", v: []byte("stale")},
			after: []read{{key: "d", gen: 5, want: "d5", wantOK: true}}},
		{name: "an oversized read value is not kept", fill: &recentWrite{key: "c", v: []byte(big)},
			after: []read{{key: "c", gen: exactGen}}},
	}
	r := newRecent()
	check := func(when string, reads []read) {
		t.Helper()
		for _, rd := range reads {
			v, ok := r.get([]byte(rd.key), rd.gen)
			if ok != rd.wantOK || string(v) != rd.want || (ok && rd.want == "" && v != nil) {
				t.Errorf("%s: get(%s, gen %d) = %q, %v; want %q, %v", when, rd.key, rd.gen, v, ok, rd.want, rd.wantOK)
			}
		}
	}
	for _, s := range steps {
		if s.commit != nil {
			r.begin(s.commit)
			check(s.name+" (committing)", s.inside)
			r.end(s.commit, !s.failed)
		}
		if s.fill != nil {
			r.fill([]byte(s.fill.key), s.fill.v)
		}
		check(s.name, s.after)
	}
	if len(r.committing) != 0 {
		t.Errorf("keys still marked as committing: %v", r.committing)
	}

	// Bounds: many small values keep the key count, large ones the size.
	for i := range recentMaxKeys + 100 {
		r.end([]recentWrite{w(fmt.Sprint("k", i), "v")}, true)
	}
	if n := len(r.vals); n > recentMaxKeys {
		t.Errorf("%d values kept, want at most %d", n, recentMaxKeys)
	}
	if _, ok := r.get([]byte(fmt.Sprint("k", recentMaxKeys+99)), exactGen); !ok {
		t.Error("the newest value was forgotten")
	}
	if _, ok := r.get([]byte("k0"), exactGen); ok {
		t.Error("the oldest value is kept beyond the key bound")
	}
	large := strings.Repeat("y", recentMaxValue)
	for i := range 2 * recentMaxBytes / recentMaxValue {
		r.end([]recentWrite{w(fmt.Sprint("l", i), large)}, true)
	}
	var sum uint64
	for k, v := range r.vals {
		sum += uint64(len(k) + len(v.v))
	}
	if sum != r.bytes || sum > recentMaxBytes {
		t.Errorf("values hold %d bytes, counted %d; want at most %d", sum, r.bytes, recentMaxBytes)
	}
	if len(r.queue) > 2*recentMaxKeys+1 {
		t.Errorf("the queue holds %d items, for %d values", len(r.queue), len(r.vals))
	}
}

// TestPebbleRecentWithinATransaction: a write transaction reads its own
// writes to a remembered bucket (puts, deletes, empty values), a rolled
// back one leaves the remembered values as they were, and a value written
// in the caller's buffer is kept as written.
func TestPebbleRecentWithinATransaction(t *testing.T) {
	t.Parallel()
	db := engineStore(t, EnginePebble).db
	get := func(k string) (v []byte, has bool) {
		err := db.view(func(tx kvTx) error {
			b := tx.Bucket(bInst)
			v, has = b.Get([]byte(k)), b.Has([]byte(k))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return v, has
	}
	buf := []byte("v1")
	if err := db.update(func(tx kvTx) error { return tx.Bucket(bInst).Put([]byte("k"), buf) }); err != nil {
		t.Fatal(err)
	}
	buf[1] = 'X' // the caller reuses its buffer
	if v, has := get("k"); string(v) != "v1" || !has {
		t.Fatalf("after the commit, k = %q (there: %v), want v1", v, has)
	}
	errRollback := errors.New("rollback")
	err := db.update(func(tx kvTx) error {
		b := tx.Bucket(bInst)
		if err := b.Put([]byte("k"), []byte("v2")); err != nil {
			return err
		}
		if v := b.Get([]byte("k")); string(v) != "v2" {
			t.Errorf("after its put, the transaction reads k = %q, want v2", v)
		}
		if err := b.Delete([]byte("k")); err != nil {
			return err
		}
		if v, has := b.Get([]byte("k")), b.Has([]byte("k")); v != nil || has {
			t.Errorf("after its delete, the transaction reads k = %q (there: %v), want nothing", v, has)
		}
		if err := b.Put([]byte("e"), nil); err != nil {
			return err
		}
		knownAbsent(b, []byte("e")) // written here: the write wins
		knownAbsent(b, []byte("f"))
		if b.Has([]byte("f")) {
			t.Error("a key known absent reads as there")
		}
		if v := b.Get([]byte("e")); v == nil || len(v) != 0 {
			t.Errorf("an empty value reads as %#v, want empty and not nil", v)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("update returned %v, want the rollback", err)
	}
	if v, has := get("k"); string(v) != "v1" || !has {
		t.Errorf("after a rollback, k = %q (there: %v), want v1", v, has)
	}
	if v, has := get("e"); v != nil || has {
		t.Errorf("after a rollback, e = %q (there: %v), want nothing", v, has)
	}
	if err := db.update(func(tx kvTx) error { return tx.Bucket(bInst).Put([]byte("e"), nil) }); err != nil {
		t.Fatal(err)
	}
	if v, has := get("e"); v == nil || len(v) != 0 || !has {
		t.Errorf("a committed empty value reads as %#v (there: %v), want empty and not nil", v, has)
	}
	// A key the transaction wrote is not taken as absent, whatever it is
	// told after.
	if err := db.update(func(tx kvTx) error {
		b := tx.Bucket(bInst)
		if err := b.Put([]byte("g"), []byte("g1")); err != nil {
			return err
		}
		knownAbsent(b, []byte("g"))
		knownAbsent(b, []byte("h"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v, has := get("g"); string(v) != "g1" || !has {
		t.Errorf("a key written, then told absent, reads %q (there: %v), want g1", v, has)
	}
	if v, has := get("h"); v != nil || has {
		t.Errorf("a key told absent reads %q (there: %v)", v, has)
	}
}

// TestPebbleRecentIsConsistent: with the remembered values in play, every
// transaction still sees one state. Each commit writes the same counter to
// two remembered buckets and to one that is not; read transactions, taken
// while commits go on, must read the three equal and never going back,
// and write transactions must read the current counter. A second key is
// put and deleted by turns in a remembered bucket and one that is not:
// every transaction finds it in both or in neither. Every third commit
// finds nothing remembered (as after an eviction), and remembers what it
// reads.
func TestPebbleRecentIsConsistent(t *testing.T) {
	t.Parallel()
	db := engineStore(t, EnginePebble).db
	const commits = 400
	// k3's lease is written by commits of its own, which touch no
	// remembered bucket (as a lease renewal's), after each commit of k.
	k, k2, k3 := []byte("k"), []byte("k2"), []byte("k3")
	u64 := func(v []byte) uint64 {
		if len(v) != 8 {
			return 0
		}
		return binary.BigEndian.Uint64(v)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	// Two readers of each kind: a lazy view takes its snapshot at the
	// lease's read, after the others came from memory (or runs again).
	pe := db.(*pebbleEngine)
	for _, view := range []func(func(kvTx) error) error{pe.view, pe.view, pe.viewLazily, pe.viewLazily} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for !done.Load() {
				var lease uint64
				err := view(func(tx kvTx) error {
					inst, state, l := u64(tx.Bucket(bInst).Get(k)), u64(tx.Bucket(bState).Get(k)), u64(tx.Bucket(bLease).Get(k))
					if inst != l || state != l {
						return fmt.Errorf("one read transaction read instance %d, state %d and lease %d", inst, state, l)
					}
					if a, b := tx.Bucket(bInst).Has(k2), tx.Bucket(bLease).Get(k2) != nil; a != b {
						return fmt.Errorf("one read transaction found k2 in instances: %v, in leases: %v", a, b)
					}
					if l3 := u64(tx.Bucket(bLease).Get(k3)); l3 > inst || inst > l3+1 {
						return fmt.Errorf("one read transaction read instance %d and k3's lease %d", inst, l3)
					}
					lease = l
					return nil
				})
				if err == nil && lease < last {
					err = fmt.Errorf("a read transaction read %d after one read %d", lease, last)
				}
				if err != nil {
					t.Error(err)
					return
				}
				last = lease
			}
		}()
	}
	rc := pe.recent
	for i := range commits {
		if i%3 == 0 {
			rc.mu.Lock()
			clear(rc.vals)
			rc.bytes = 0
			rc.mu.Unlock()
		}
		err := db.update(func(tx kvTx) error {
			inst, state, lease := u64(tx.Bucket(bInst).Get(k)), u64(tx.Bucket(bState).Get(k)), u64(tx.Bucket(bLease).Get(k))
			if inst != lease || state != lease {
				return fmt.Errorf("a write transaction read instance %d, state %d and lease %d", inst, state, lease)
			}
			if a, b := tx.Bucket(bInst).Get(k2) != nil, tx.Bucket(bLease).Has(k2); a != b {
				return fmt.Errorf("a write transaction found k2 in instances: %v, in leases: %v", a, b)
			}
			v := binary.BigEndian.AppendUint64(nil, lease+1)
			for _, name := range [][]byte{bInst, bState, bLease} {
				if err := tx.Bucket(name).Put(k, v); err != nil {
					return err
				}
			}
			for _, name := range [][]byte{bInst, bLease} {
				var err error
				if i%2 == 0 {
					err = tx.Bucket(name).Put(k2, v)
				} else {
					err = tx.Bucket(name).Delete(k2)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			err = db.update(func(tx kvTx) error {
				return tx.Bucket(bLease).Put(k3, tx.Bucket(bInst).Get(k))
			})
		}
		if err != nil {
			t.Error(err)
			break
		}
	}
	done.Store(true)
	wg.Wait()
}

// A lazy read whose function panics after its late snapshot (the store
// turns a panic into an error, as bbolt's corrupt pages make them) leaves
// no snapshot or iterator open: the store closes cleanly after it.
func TestPebbleLazyReadPanicLeaksNothing(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "weft"), Config{Engine: EnginePebble})
	if err != nil {
		t.Fatal(err)
	}
	err = s.readLazily(context.Background(), func(tx kvTx) error {
		tx.Bucket(bLease).Get([]byte("k")) // not remembered: takes the snapshot
		tx.Bucket(bLease).Cursor().First() // and an iterator on it
		panic("a read that fails")
	})
	if err == nil || !strings.Contains(err.Error(), "a read that fails") {
		t.Fatalf("the panicking read returned %v, want an error naming the panic", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("closing the store after a panicking lazy read: %v", err)
	}
}
