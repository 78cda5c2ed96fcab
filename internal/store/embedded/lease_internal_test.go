package embedded

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// A file written before lease records existed has its leases only in the
// instance records: renewal migrates them and keeps the expiry index right.
func TestRenewalMigratesLeasesWithoutRecord(t *testing.T) {
	t.Parallel()
	for _, e := range []Engine{EngineBolt, EnginePebble} {
		t.Run("engine="+string(e), func(t *testing.T) {
			t.Parallel()
			testRenewalMigratesLeasesWithoutRecord(t, e)
		})
	}
}

func testRenewalMigratesLeasesWithoutRecord(t *testing.T, e Engine) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	s, err := Open(filepath.Join(t.TempDir(), "weft"), Config{Now: func() time.Time { return now }, Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	in := &weft.Instance{ID: "old", Workflow: "w", Version: 1, Status: weft.StatusRunning,
		Lease: weft.Lease{Node: "n1", Boot: "b1", Expiry: now.Add(10 * time.Second)}}
	if _, err := s.Commit(ctx, store.Commit{Instance: in}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.update(func(tx kvTx) error { return tx.Bucket(bLease).Delete([]byte("old")) }); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetInstance(ctx, "old"); err != nil || !got.Lease.Expiry.Equal(now.Add(10*time.Second)) {
		t.Fatalf("before renewal: %+v, %v; want the record's lease", got, err)
	}
	later := now.Add(time.Minute)
	renewed, err := s.RenewLeases(ctx, store.LeaseRenewal{Node: "n1", Boot: "b1", IDs: []string{"old"}, Expiry: later})
	if err != nil || len(renewed) != 1 {
		t.Fatalf("RenewLeases = %v, %v; want old renewed", renewed, err)
	}
	got, err := s.GetInstance(ctx, "old")
	if err != nil || !got.Lease.Expiry.Equal(later) {
		t.Fatalf("after renewal: %+v, %v; want expiry %s", got, err, later)
	}
	for _, tt := range []struct {
		at   time.Time
		want int
	}{{now.Add(30 * time.Second), 0}, {later, 1}} {
		ids, err := s.ExpiredLeases(ctx, tt.at, 10)
		if err != nil || len(ids) != tt.want {
			t.Errorf("ExpiredLeases(%s) = %v, %v; want %d (one index entry, at the new expiry)", tt.at, ids, err, tt.want)
		}
	}
}
