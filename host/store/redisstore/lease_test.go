package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/store"
	"github.com/weftworks/weft/host/store/redisstore"
	"github.com/weftworks/weft/internal/redistest"
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

func leasedInstance(id string, status store.Status, l store.Lease) *store.Instance {
	input, _ := json.Marshal(map[string]string{"id": id})
	return &store.Instance{ID: id, Workflow: "w", Version: 1, Status: status, Input: input, Lease: l}
}

func create(t *testing.T, s *redisstore.Store, in *store.Instance) {
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
		l := store.Lease{Node: node, Boot: boot, Expiry: soon}
		if i%100 == 7 {
			l.Boot = "other"
		}
		create(t, s, leasedInstance(id, store.StatusRunning, l))
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
		want := store.Lease{Node: node, Boot: boot, Expiry: later}
		if n%100 == 7 {
			want = store.Lease{Node: node, Boot: "other", Expiry: soon}
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

// TestOpenMigratesSchema1: a store written with the leases in the instance
// hashes (schema 1) is migrated by Open; its leases read, renew and expire
// as before, and a second Open finds nothing to do.
func TestOpenMigratesSchema1(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	s := openAt(t, c, "old:", now)
	live := store.Lease{Node: "n1", Boot: "b1", Expiry: now.Add(time.Hour)}
	create(t, s, leasedInstance("live", store.StatusRunning, live))
	create(t, s, leasedInstance("done", store.StatusCompleted, live))
	create(t, s, leasedInstance("free", store.StatusPending, store.Lease{}))
	for i := range 2500 { // more than a migration batch
		create(t, s, leasedInstance(fmt.Sprintf("x%04d", i), store.StatusRunning, live))
	}

	// Back to schema 1: the lease as fields ln, lb, le of the instance.
	const p = "{old:}"
	leases, err := c.HGetAll(ctx, p+"l").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 2502 {
		t.Fatalf("%d leases in the l hash, want 2502", len(leases))
	}
	for id, v := range leases {
		i := strings.IndexByte(v[17:], ':')
		n, _ := strconv.Atoi(v[17 : 17+i])
		boot := v[17+i+1 : 17+i+1+n]
		if err := c.HSet(ctx, p+"i:"+id, "ln", v[17+i+1+n:], "lb", boot, "le", v[:16]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Del(ctx, p+"l").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, p+"schema", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		s = openAt(t, c, "old:", now)
		if v := c.Get(ctx, p+"schema").Val(); v != "2" {
			t.Fatalf("schema %q after Open, want 2", v)
		}
		if n := c.HLen(ctx, p+"l").Val(); n != 2502 {
			t.Errorf("%d leases after Open, want 2502", n)
		}
		for id, want := range map[string]store.Lease{"live": live, "done": live, "free": {}, "x2499": live} {
			in, err := s.GetInstance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if in.Lease != want {
				t.Errorf("%s: lease %+v after migration, want %+v", id, in.Lease, want)
			}
			if f := c.HMGet(ctx, p+"i:"+id, "ln", "lb", "le").Val(); f[0] != nil || f[1] != nil || f[2] != nil {
				t.Errorf("%s: schema-1 lease fields left in the hash: %v", id, f)
			}
		}
	}
	renewed, err := s.RenewLeases(ctx, store.LeaseRenewal{Node: "n1", Boot: "b1", IDs: []string{"live", "done", "free"}, Expiry: now.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(renewed) != 1 || renewed[0] != "live" {
		t.Errorf("renewed %v after migration, want [live]", renewed)
	}
	expired, err := s.ExpiredLeases(ctx, now.Add(90*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 10 || expired[0] != "x0000" {
		t.Errorf("expired leases after migration: %v, want x0000 to x0009", expired)
	}
	if later, err := s.ExpiredLeases(ctx, now.Add(3*time.Hour), 1); err != nil || len(later) != 1 || later[0] != "x0000" {
		t.Errorf("ExpiredLeases 3 h later = %v, %v", later, err)
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
		create(t, s, leasedInstance(ids[i], store.StatusRunning, store.Lease{Node: "n", Boot: "b", Expiry: e}))
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
