package redislock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/lock/redislock"
)

// ExtendLeases extends a batch in one pipeline per server with the
// semantics of Extend, lease by lease: held leases are extended, expired or
// taken ones are lost, a quorum down is transient, and leases of another
// Locker are extended by their own Extend.
func TestExtendLeasesInOneBatch(t *testing.T) {
	t.Parallel()
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d servers", servers), func(t *testing.T) {
			t.Parallel()
			ss := cluster(t, servers)
			l := newLocker(t, ss, redislock.Config{})
			other := newLocker(t, ss, redislock.Config{})
			be, ok := l.(lock.BatchExtender)
			if !ok {
				t.Fatal("the redis Locker is not a lock.BatchExtender")
			}
			// Long enough that no lease expires, on a loaded machine,
			// before the batch extends it.
			const ttl = 10 * time.Second
			var leases []lock.Lease
			for i := range 5 {
				ls, err := l.Acquire(ctx(t), fmt.Sprintf("k%d", i), ttl)
				if err != nil {
					t.Fatal(err)
				}
				leases = append(leases, ls)
			}
			short, err := l.Acquire(ctx(t), "short", 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			foreign, err := local.New(local.Config{}).Acquire(ctx(t), "elsewhere", ttl)
			if err != nil {
				t.Fatal(err)
			}
			released, err := l.Acquire(ctx(t), "released", ttl)
			if err != nil {
				t.Fatal(err)
			}
			released.Release(ctx(t))
			// "short" expires and another holder takes its key.
			var taken lock.Lease
			eventually(t, "taking the expired key", func() error {
				var ok bool
				taken, ok, err = other.TryAcquire(ctx(t), "short", ttl)
				if err == nil && !ok {
					err = lock.Transient(errors.New("still held")) // poll again
				}
				return err
			})
			defer taken.Release(ctx(t))

			batch := append(append([]lock.Lease{}, leases...), short, foreign, released)
			// Extend past the first ttl: the held leases survive it.
			errs := be.ExtendLeases(ctx(t), batch, 30*time.Second)
			for i := range leases {
				if errs[i] != nil {
					t.Errorf("lease %s: %v", leases[i].Key(), errs[i])
				}
			}
			if n := len(leases); !errors.Is(errs[n], lock.ErrLost) || errs[n+1] != nil || !errors.Is(errs[n+2], lock.ErrLost) {
				t.Errorf("short, foreign, released: %v, %v, %v; want lost, nil, lost", errs[n], errs[n+1], errs[n+2])
			}
			for _, ls := range leases {
				if until := time.Until(ls.Expiry()); until < 20*time.Second {
					t.Errorf("lease %s expires in %s after the batch, want about 30s", ls.Key(), until)
				}
				if _, ok, err := other.TryAcquire(ctx(t), ls.Key(), ttl); ok || err != nil {
					t.Errorf("TryAcquire of extended %s: %v, %v", ls.Key(), ok, err)
				}
			}
			if servers == 3 {
				ss[0].Stop(t)
				if errs := be.ExtendLeases(ctx(t), leases, ttl); errors.Join(errs...) != nil {
					t.Errorf("with one of three servers down: %v", errors.Join(errs...))
				}
				ss[1].Stop(t)
				for i, err := range be.ExtendLeases(ctx(t), leases, ttl) {
					if !errors.Is(err, lock.ErrTransient) {
						t.Errorf("lease %d with two of three servers down: %v, want transient", i, err)
					}
				}
			}
		})
	}
}
