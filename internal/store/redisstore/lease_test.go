package redisstore_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/redisstore"
)

func openAt(t *testing.T, c *redis.Client, prefix string, now time.Time) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(t.Context(), redisstore.Config{
		Client: c, Prefix: prefix, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func leasedInstance(id string, status weft.Status, l weft.Lease) *weft.Instance {
	input, _ := json.Marshal(map[string]string{"id": id})
	return &weft.Instance{ID: id, Workflow: "w", Version: 1, Status: status, Input: input, Lease: l}
}

func create(t *testing.T, s *redisstore.Store, in *weft.Instance) {
	t.Helper()
	if _, err := s.Commit(t.Context(), store.Commit{Instance: in}); err != nil {
		t.Fatalf("create %s: %v", in.ID, err)
	}
}

// TestRenewLeasesInChunks: a batch larger than the scripts' chunks of 2,000
// renews every lease it holds and no other, and owners whose names hold
// the lease encoding's separators read back as written.
func TestRenewLeasesInChunks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	s := openAt(t, c, "", now)
	node, boot := "node:7:", "12:boot:"
	soon, later := now.Add(10*time.Second), now.Add(time.Minute)
	var ids []string
	for i := range 2203 {
		id := fmt.Sprintf("i%04d", i)
		l := weft.Lease{Node: node, Boot: boot, Expiry: soon}
		if i%100 == 7 {
			l.Boot = "other"
		}
		create(t, s, leasedInstance(id, weft.StatusRunning, l))
		ids = append(ids, id)
	}
	renewed, err := s.RenewLeases(t.Context(), store.LeaseRenewal{Node: node, Boot: boot, IDs: ids, Expiry: later})
	if err != nil {
		t.Fatal(err)
	}
	if len(renewed) != 2203-22 {
		t.Errorf("renewed %d leases, want %d", len(renewed), 2203-22)
	}
	for _, id := range []string{"i0000", "i0007", "i0599", "i0707", "i1999", "i2000", "i2202"} {
		in, err := s.GetInstance(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(id[1:])
		want := weft.Lease{Node: node, Boot: boot, Expiry: later}
		if n%100 == 7 {
			want = weft.Lease{Node: node, Boot: "other", Expiry: soon}
		}
		if in.Lease != want {
			t.Errorf("%s: lease %+v, want %+v", id, in.Lease, want)
		}
	}
	expired, err := s.ExpiredLeases(t.Context(), soon, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 22 || expired[0] != "i0007" {
		t.Errorf("expired at the old expiry: %v, want the 22 leases of the other boot", expired)
	}
}

// TestExpiredLeasesToTheNanosecond: the lease index keeps microseconds,
// yet a lease is expired exactly when its expiry is not after now, before
// 1970 too (and within its last microsecond); and a renewal refuses a lease that expired a nanosecond ago.
func TestExpiredLeasesToTheNanosecond(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	expiries := []time.Time{
		time.Unix(0, -1500).UTC(),
		time.Unix(0, -500).UTC(),
		time.Unix(0, 500).UTC(),
		time.Date(2026, 11, 25, 1, 2, 3, 123456789, time.UTC),
		time.Date(2026, 11, 25, 1, 2, 3, 123457000, time.UTC),
	}
	ids := []string{"a", "a2", "b", "c", "d"}
	s := openAt(t, c, "", expiries[3])
	for i, e := range expiries {
		create(t, s, leasedInstance(ids[i], weft.StatusRunning, weft.Lease{Node: "n", Boot: "b", Expiry: e}))
	}
	for i, e := range expiries {
		for _, tt := range []struct {
			now  time.Time
			want []string
		}{{e.Add(-time.Nanosecond), ids[:i]}, {e, ids[:i+1]}} {
			got, err := s.ExpiredLeases(t.Context(), tt.now, 10)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("ExpiredLeases(%s) = %v, want %v", tt.now.Format(time.RFC3339Nano), got, tt.want)
			}
		}
	}
	// The store's clock is expiries[3]: c expired this very nanosecond, d
	// expires 211 ns later.
	renewed, err := s.RenewLeases(t.Context(), store.LeaseRenewal{Node: "n", Boot: "b", IDs: []string{"c", "d"}, Expiry: expiries[4].Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(renewed) != "[d]" {
		t.Errorf("renewed %v, want [d]", renewed)
	}
}
