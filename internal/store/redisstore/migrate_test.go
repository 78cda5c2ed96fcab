package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
)

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
	live := weft.Lease{Node: "n1", Boot: "b1", Expiry: now.Add(time.Hour)}
	if _, err := s.PutPlugin(ctx, weft.PluginRecord{Name: "pay", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	pinned := leasedInstance("live", weft.StatusRunning, live)
	pinned.Plugins = map[string]string{"pay": "v1"}
	create(t, s, pinned)
	done := leasedInstance("done", weft.StatusCompleted, live)
	done.DeleteAfter = now.Add(time.Hour)
	create(t, s, done)
	create(t, s, leasedInstance("free", weft.StatusPending, weft.Lease{}))
	for i := range 2500 { // more than a migration batch
		create(t, s, leasedInstance(fmt.Sprintf("x%04d", i), weft.StatusRunning, live))
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
	// The indexes of all instances and of each workflow's, which schema 3
	// dropped.
	addUnionIndexes(t, c, p)
	// And the index memberships in a set x:<id> of (key, member) pairs,
	// where schema 2 keeps the pinned plugins and delete-after time.
	pair := func(k, m string) string { return strconv.Itoa(len(p+k)) + ":" + p + k + m }
	for _, id := range c.ZRange(ctx, p+"ix:all", 0, -1).Val() {
		id = id[16:]
		f := c.HMGet(ctx, p+"i:"+id, "ct", "wf", "st", "term", "pn", "da").Val()
		ct, wf, st := f[0].(string), f[1].(string), f[2].(string)
		xs := []any{pair("ix:all", ct+id), pair("ix:w:"+wf, ct+id), pair("ix:s:"+st, ct+id), pair("ix:ws:"+st+":"+wf, ct+id)}
		if f[3] != "1" && f[4] == "3:pay" {
			xs = append(xs, pair("u:pay", id))
		}
		if f[3] == "1" && f[5] != "" {
			xs = append(xs, pair("rx", f[5].(string)+id))
		}
		if err := c.SAdd(ctx, p+"x:"+id, xs...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HDel(ctx, p+"i:"+id, "pn", "da").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, p+"schema", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		s = openAt(t, c, "old:", now)
		if v := c.Get(ctx, p+"schema").Val(); v != "3" {
			t.Fatalf("schema %q after Open, want 3", v)
		}
		if n := c.HLen(ctx, p+"l").Val(); n != 2502 {
			t.Errorf("%d leases after Open, want 2502", n)
		}
		for id, want := range map[string]weft.Lease{"live": live, "done": live, "free": {}, "x2499": live} {
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
	if n := c.Exists(ctx, p+"x:live", p+"x:done", p+"x:free", p+"lx", p+"ix:all", p+"ix:w:w").Val(); n != 0 {
		t.Errorf("%d schema-1 or schema-2 keys left after the migration", n)
	}
	// The pin and the delete-after time, as the migration left them.
	if err := s.DeletePlugin(ctx, "pay"); !errors.Is(err, weft.ErrInUse) {
		t.Errorf("DeletePlugin of a plugin a migrated instance pins: %v, want ErrInUse", err)
	}
	if ids, err := s.ExpiredInstances(ctx, now.Add(2*time.Hour), 10); err != nil || fmt.Sprint(ids) != "[done]" {
		t.Errorf("ExpiredInstances after the migration = %v, %v; want [done]", ids, err)
	}
	if err := s.DeleteInstance(ctx, "done", 0); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.ExpiredInstances(ctx, now.Add(2*time.Hour), 10); err != nil || len(ids) != 0 {
		t.Errorf("ExpiredInstances after the delete = %v, %v", ids, err)
	}
	in, err := s.GetInstance(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	in.Status = weft.StatusCompleted
	if _, err := s.Commit(ctx, store.Commit{Instance: in}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePlugin(ctx, "pay"); err != nil {
		t.Errorf("DeletePlugin once the pinning instance completed: %v", err)
	}
	renewed, err := s.RenewLeases(ctx, store.LeaseRenewal{Node: "n1", Boot: "b1", IDs: []string{"free", "x0001"}, Expiry: now.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(renewed) != "[x0001]" {
		t.Errorf("renewed %v after migration, want [x0001]", renewed)
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

// addUnionIndexes writes the indexes of all instances and of each
// workflow's, as schemas 1 and 2 kept them, from the status indexes.
func addUnionIndexes(t *testing.T, c *redis.Client, p string) {
	t.Helper()
	ctx := context.Background()
	for _, st := range weft.Statuses() {
		for _, m := range c.ZRange(ctx, p+"ix:s:"+string(st), 0, -1).Val() {
			wf := c.HGet(ctx, p+"i:"+m[16:], "wf").Val()
			for _, k := range []string{"ix:all", "ix:w:" + wf} {
				if err := c.ZAdd(ctx, p+k, redis.Z{Member: m}).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestOpenMigratesSchema2: Open deletes a schema-2 store's indexes of all
// instances and of each workflow's, over more than one batch, and the
// listings that read them read the same from the status indexes.
func TestOpenMigratesSchema2(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	s := openAt(t, c, "two:", now)
	sts := weft.Statuses()
	for i := range 1500 { // more than a migration batch
		in := leasedInstance(fmt.Sprintf("i%04d", i), sts[i%len(sts)], weft.Lease{})
		in.Workflow = fmt.Sprintf("wf%d", i%3)
		create(t, s, in)
	}
	const p = "{two:}"
	addUnionIndexes(t, c, p)
	if n := c.ZCard(ctx, p+"ix:all").Val(); n != 1500 {
		t.Fatalf("%d instances in ix:all, want 1500", n)
	}
	if err := c.Set(ctx, p+"schema", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s = openAt(t, c, "two:", now)
		if v := c.Get(ctx, p+"schema").Val(); v != "3" {
			t.Fatalf("schema %q after Open, want 3", v)
		}
		if n := c.Exists(ctx, p+"ix:all", p+"ix:w:wf0", p+"ix:w:wf1", p+"ix:w:wf2").Val(); n != 0 {
			t.Errorf("%d schema-2 indexes left after the migration", n)
		}
	}
	for _, f := range []weft.InstanceFilter{{}, {Workflow: "wf1"}, {NewestFirst: true}} {
		var ids []string
		for cursor := ""; ; {
			f.Cursor, f.Limit = cursor, 500
			items, next, err := s.ListInstances(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range items {
				ids = append(ids, in.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		want := 1500
		if f.Workflow != "" {
			want = 500
		}
		if len(ids) != want {
			t.Errorf("ListInstances(%+v) listed %d instances after the migration, want %d", f, len(ids), want)
		}
	}
}
