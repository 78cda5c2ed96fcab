package embedded_test

import (
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
)

// TestCommitSendsToItself: a Commit's Send may name the committing
// instance (a workflow signalling itself), even from its create: the
// message is written after the instance.
func TestCommitSendsToItself(t *testing.T) {
	t.Parallel()
	forEngines(t, testCommitSendsToItself)
}

func testCommitSendsToItself(t *testing.T, e embedded.Engine) {
	s := openE(t, e, storePath(t.TempDir(), e), nil)
	ctx := t.Context()
	in := &weft.Instance{ID: "i", Workflow: "w", Status: weft.StatusRunning}
	self := weft.Message{InstanceID: "i", ID: "tick", Kind: "stimulus"}
	if _, err := s.Commit(ctx, store.Commit{Instance: in, Send: []weft.Message{self}}); err != nil {
		t.Fatal(err)
	}
	// Consumed applies before Send: one commit consumes a message and
	// sends the next one under the same id.
	in.Rev = 1
	if _, err := s.Commit(ctx, store.Commit{Instance: in, Consumed: []string{"tick"}, Send: []weft.Message{self}}); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Inbox(ctx, "i")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].ID != "tick" || msgs[0].Seq != 2 {
		t.Errorf("inbox = %+v, want tick once, written second", msgs)
	}
}

// TestOpenAddsInbox: a file written before the inbox buckets existed (same
// schema version) opens, and its instances get an inbox.
func TestOpenAddsInbox(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weft.db")
	s := openBoltFile(t, path, nil)
	if _, err := s.Commit(t.Context(), store.Commit{Instance: &weft.Instance{ID: "i", Workflow: "w", Status: weft.StatusPending}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"inbox", "inbox_ids"} {
			if err := tx.DeleteBucket([]byte(name)); err != nil {
				return fmt.Errorf("delete bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	s = openBoltFile(t, path, nil)
	if _, err := s.Deliver(t.Context(), nil, []weft.Message{{InstanceID: "i", ID: "m", Kind: "cancel"}}); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Inbox(t.Context(), "i")
	if err != nil || len(msgs) != 1 || msgs[0].ID != "m" {
		t.Errorf("inbox = %+v, %v", msgs, err)
	}
}
