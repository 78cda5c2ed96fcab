package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// TestInstRecord: a record is framed with its documents as they are, reads
// back whole (copied or shared), and a record of an earlier version (the
// JSON of instRecord) reads as before.
func TestInstRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	r := &instRecord{Instance: weft.Instance{
		ID: "i1", Workflow: "w", Status: weft.StatusRunning, Rev: 3, CreatedAt: at, UpdatedAt: at,
		Input: json.RawMessage(`{"html":"<&>","big":1e400}`), Vars: json.RawMessage(`{"a":"\u2028"}`),
	}, HistSeq: 7}
	raw, err := encodeInst(r)
	if err != nil {
		t.Fatal(err)
	}
	if raw[0] != instFramed || !bytes.Contains(raw, r.Input) || !bytes.Contains(raw, r.Vars) {
		t.Fatalf("record %q: want framed, the documents as they are", raw)
	}
	for _, clone := range []bool{true, false} {
		got, err := decodeInst("i1", raw, clone)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("clone %v: read %+v, want %+v", clone, got, r)
		}
		shared := &got.Input[0] == &raw[bytes.Index(raw, r.Input)]
		if shared == clone {
			t.Errorf("clone %v: the input shares the record's memory: %v", clone, shared)
		}
	}
	old, err := json.Marshal(r) // as the earlier version stored it
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeInst("i1", old, true)
	if err != nil {
		t.Fatal(err)
	}
	var want instRecord
	if err := json.Unmarshal(old, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, &want) {
		t.Errorf("earlier record read %+v, want %+v", got, &want)
	}
	if meta, _, err := splitInst(old); err != nil || !bytes.Equal(meta, old) {
		t.Errorf("splitInst of an earlier record = %q, %v; want it whole", meta, err)
	}
	for _, bad := range [][]byte{{instFramed}, {instFramed, 5, '{', '}'}, append(append([]byte{}, raw...), 0), raw[:len(raw)-1]} {
		if _, err := decodeInst("i1", bad, true); err == nil {
			t.Errorf("decodeInst(%q) succeeded, want an error", bad)
		}
	}
}

// TestEncodeHistory: an entry's data is spliced as it is.
func TestEncodeHistory(t *testing.T) {
	t.Parallel()
	e := weft.HistoryEntry{Seq: 2, Type: weft.HistoryActivityCompleted, Time: time.Unix(0, 0).UTC(), Data: json.RawMessage(`{"output":"<b>"}`)}
	raw, err := store.EncodeHistory(e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"data":{"output":"<b>"}`)) {
		t.Errorf("entry %s: want the data as it is", raw)
	}
	var got weft.HistoryEntry
	if err := json.Unmarshal(raw, &got); err != nil || !reflect.DeepEqual(got, e) {
		t.Errorf("read %+v, %v; want %+v", got, err, e)
	}
	e.Data = nil
	if raw, err := store.EncodeHistory(e); err != nil || bytes.Contains(raw, []byte("data")) {
		t.Errorf("entry without data: %s, %v", raw, err)
	}
}

// FuzzSplitInst: a stored record of any bytes is split or refused, never a
// panic, and what it splits into lies within it.
func FuzzSplitInst(f *testing.F) {
	r := &instRecord{Instance: weft.Instance{ID: "i", Workflow: "w", Input: json.RawMessage(`1`), Output: json.RawMessage(`"x"`)}}
	raw, err := encodeInst(r)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][]byte{raw, []byte(`{"id":"i"}`), {instFramed}, {instFramed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, nil} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		meta, docs, err := splitInst(raw)
		if err != nil {
			if !errors.Is(err, errFrame) {
				t.Fatalf("splitInst(%q): %v, want errFrame", raw, err)
			}
			return
		}
		n := len(meta)
		for _, d := range docs {
			n += len(d)
		}
		if n > len(raw) {
			t.Fatalf("splitInst(%q): %d bytes out of %d", raw, n, len(raw))
		}
		_, _ = decodeInst("i", raw, true) // an error or a record, never a panic
	})
}

// TestSchemaOneOpens: a store of schema version 1 (every instance record
// JSON) opens, on either engine: its records read as they are, Open marks
// it version 2, and the next commit of an instance frames its record.
func TestSchemaOneOpens(t *testing.T) {
	t.Parallel()
	for _, e := range []Engine{EngineBolt, EnginePebble} {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "store")
			ctx := context.Background()
			s, err := Open(path, Config{Engine: e, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			old := instRecord{Instance: weft.Instance{ID: "i1", Workflow: "w", Version: 1, Status: weft.StatusRunning, Rev: 1,
				Input: json.RawMessage(`{"a":1}`), CreatedAt: time.Unix(0, 0).UTC(), UpdatedAt: time.Unix(0, 0).UTC()}}
			if err := s.db.update(func(tx kvTx) error {
				raw, err := json.Marshal(old) // as version 1 wrote it
				if err != nil {
					return err
				}
				if err := tx.Bucket(bInst).Put([]byte("i1"), raw); err != nil {
					return err
				}
				return tx.Bucket(bMeta).Put([]byte("schema"), []byte("1"))
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(path, Config{Engine: e, Logger: slog.New(slog.DiscardHandler)}); err != nil {
				t.Fatalf("opening a store of schema 1: %v", err)
			}
			defer func() {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			}()
			got, err := s.GetInstance(ctx, "i1")
			if err != nil || string(got.Input) != `{"a":1}` {
				t.Fatalf("GetInstance = %+v, %v", got, err)
			}
			var schema string
			if err := s.db.view(func(tx kvTx) error { schema = string(tx.Bucket(bMeta).Get([]byte("schema"))); return nil }); err != nil || schema != schemaVersion {
				t.Errorf("schema after Open = %q, %v; want %q", schema, err, schemaVersion)
			}
			got.Status = weft.StatusCompleted
			got.Output = json.RawMessage(`"done"`)
			if _, err := s.Commit(ctx, store.Commit{Instance: got, Fence: got.Fence}); err != nil {
				t.Fatal(err)
			}
			var raw []byte
			if err := s.db.view(func(tx kvTx) error { raw = bytes.Clone(tx.Bucket(bInst).Get([]byte("i1"))); return nil }); err != nil || len(raw) == 0 || raw[0] != instFramed {
				t.Errorf("record after a commit: %q, %v; want framed", raw, err)
			}
			if again, err := s.GetInstance(ctx, "i1"); err != nil || string(again.Output) != `"done"` || string(again.Input) != `{"a":1}` {
				t.Errorf("after the commit: %+v, %v", again, err)
			}
		})
	}
}

// TestStatelessRecord: a record written without state says so, and its
// reads skip the state bucket; one written before the flag existed (no
// flag, a state record beside it) reads its state; a commit that drops the
// state deletes its record.
func TestStatelessRecord(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e Engine) {
		s := engineStore(t, e)
		ctx := t.Context()
		stateOf := func(id string) (json.RawMessage, bool) {
			t.Helper()
			got, err := s.GetInstance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var has bool
			if err := s.db.view(func(tx kvTx) error {
				has = tx.Bucket(bState).Has([]byte(id))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return got.State, has
		}
		in := &weft.Instance{ID: "i1", Workflow: "w", Version: 1, Status: weft.StatusRunning}
		rev, err := s.Commit(ctx, store.Commit{Instance: in})
		if err != nil {
			t.Fatal(err)
		}
		var rec *instRecord
		if err := s.db.view(func(tx kvTx) (err error) { rec, err = getInst(tx, "i1"); return err }); err != nil || !rec.Stateless {
			t.Fatalf("a new instance without state: record %+v, %v; want it stateless", rec, err)
		}
		in.Rev, in.State = rev, json.RawMessage(`{"seq":1}`)
		if rev, err = s.Commit(ctx, store.Commit{Instance: in}); err != nil {
			t.Fatal(err)
		}
		if st, has := stateOf("i1"); string(st) != `{"seq":1}` || !has {
			t.Fatalf("after a commit with state: %s (record there: %v)", st, has)
		}
		in.Rev, in.State = rev, nil
		if _, err = s.Commit(ctx, store.Commit{Instance: in}); err != nil {
			t.Fatal(err)
		}
		if st, has := stateOf("i1"); st != nil || has {
			t.Fatalf("after a commit without state: %s (record there: %v), want none", st, has)
		}

		// A record of the earlier version, with a state record.
		old := &instRecord{Instance: weft.Instance{ID: "i2", Workflow: "w", Version: 1, Status: weft.StatusRunning, Rev: 1}}
		raw, err := encodeInst(old)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.db.update(func(tx kvTx) error {
			if err := tx.Bucket(bInst).Put([]byte("i2"), raw); err != nil {
				return err
			}
			return tx.Bucket(bState).Put([]byte("i2"), []byte(`{"seq":2}`))
		}); err != nil {
			t.Fatal(err)
		}
		if st, has := stateOf("i2"); string(st) != `{"seq":2}` || !has {
			t.Fatalf("an earlier record's state reads %s (record there: %v)", st, has)
		}
		in2 := &weft.Instance{ID: "i2", Workflow: "w", Version: 1, Status: weft.StatusRunning, Rev: 1}
		if _, err = s.Commit(ctx, store.Commit{Instance: in2}); err != nil {
			t.Fatal(err)
		}
		if st, has := stateOf("i2"); st != nil || has {
			t.Fatalf("after an earlier record's commit without state: %s (record there: %v), want none", st, has)
		}
	})
}
