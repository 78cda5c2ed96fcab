package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
)

// Partitioned is the store divided into partitions (docs/cluster.md,
// "Partitions"): P partition stores, each a Store of this package under its
// own hash tag, holding the instances whose ids hash to it with everything
// a commit touches, and one catalog store under the store's own tag
// ("{" + Prefix + "}"), holding the rest. It implements store.Store by
// routing: an instance's calls go to its partition, listings and sweeps
// merge the partitions', catalog calls go to the catalog, and the calls
// that span two stores run the protocols role.go names. No Redis command
// touches keys of two tags, so a Redis Cluster spreads the partitions over
// its masters.
//
// It is safe for concurrent use. A background loop (Config.RelayInterval
// of OpenPartitioned) relays what a crashed writer left in an outbox and
// settles the stimulus reservations a crashed writer left; Close stops it.
type Partitioned struct {
	cat   *Store
	parts []*Store
	log   *slog.Logger
	now   func() time.Time
	cfg   PartitionedConfig

	closed atomic.Bool
	stop   context.CancelFunc
	done   chan struct{}
}

var _ store.Store = (*Partitioned)(nil)

// PartitionedConfig configures OpenPartitioned.
type PartitionedConfig struct {
	// Config is every store's configuration (the catalog's and the
	// partitions'); its Prefix names the catalog's tag and, with the
	// partition numbers, the partitions' (partition.Tags).
	Config

	// Partitions is P, from 2 to partition.Max. It is recorded in the
	// catalog when the store is created: OpenPartitioned refuses another
	// number for an existing store.
	Partitions int

	// RelayInterval is how often the background loop looks for outbox
	// entries and stimulus reservations left behind. Defaults to 1s.
	RelayInterval time.Duration

	// RelayAfter is how old an outbox entry must be before the loop relays
	// it: younger ones are being relayed by their writer. Defaults to 2s.
	RelayAfter time.Duration

	// ReserveFor is how long a commit's reservation of a queued stimulus
	// holds before the loop settles it. Defaults to 30s.
	ReserveFor time.Duration

	// BarrierWait is how long a create refused by a plugin delete's
	// barrier (plugindelete.go) waits for the catalog to move past it
	// before the router lifts it, taking the deleter for dead. Defaults
	// to 2s.
	BarrierWait time.Duration
}

// Defaults of PartitionedConfig.
const (
	DefaultRelayInterval = time.Second
	DefaultRelayAfter    = 2 * time.Second
	DefaultReserveFor    = 30 * time.Second
	DefaultBarrierWait   = 2 * time.Second
)

// OpenPartitioned opens the partitioned store of cfg: the catalog and
// every partition (Open's checks, each), recording cfg.Partitions in a new
// store and refusing another number in an existing one. A whole store
// under cfg.Prefix (one made by Open) becomes the catalog, and its
// instances are moved into the partitions before OpenPartitioned returns
// (migratepartitions.go): every node of the whole store must be stopped
// first, as for every migration.
func OpenPartitioned(ctx context.Context, cfg PartitionedConfig) (*Partitioned, error) {
	cfg.Config = cfg.Config.WithDefaults()
	if cfg.RelayInterval == 0 {
		cfg.RelayInterval = DefaultRelayInterval
	}
	if cfg.RelayAfter == 0 {
		cfg.RelayAfter = DefaultRelayAfter
	}
	if cfg.ReserveFor == 0 {
		cfg.ReserveFor = DefaultReserveFor
	}
	if cfg.BarrierWait == 0 {
		cfg.BarrierWait = DefaultBarrierWait
	}
	switch {
	case cfg.Partitions < 2 || cfg.Partitions > partition.Max:
		return nil, fmt.Errorf("redisstore: Partitions must be from 2 to %d, got %d", partition.Max, cfg.Partitions)
	case cfg.RelayInterval < 0, cfg.RelayAfter < 0, cfg.ReserveFor < 0, cfg.BarrierWait < 0:
		return nil, errors.New("redisstore: RelayInterval, RelayAfter, ReserveFor and BarrierWait must not be negative")
	}
	tags, err := partition.Tags(cfg.Prefix, cfg.Partitions)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	catCfg := cfg.Config
	catCfg.role = roleCatalog
	cat, err := Open(ctx, catCfg)
	if err != nil {
		return nil, err
	}
	if err := checkPartitions(ctx, cat, cfg.Partitions); err != nil {
		return nil, err
	}
	r := &Partitioned{cat: cat, parts: make([]*Store, len(tags)), log: cfg.Logger, now: cfg.Now, cfg: cfg}
	for i, tag := range tags {
		pc := cfg.Config
		pc.tag, pc.role = tag, rolePartition
		if r.parts[i], err = Open(ctx, pc); err != nil {
			return nil, fmt.Errorf("redisstore: partition %d: %w", i, err)
		}
	}
	if err := r.moveWhole(ctx); err != nil {
		return nil, err
	}
	loop, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stop, r.done = stop, make(chan struct{})
	go r.run(loop)
	return r, nil
}

// checkPartitions records n as the store's number of partitions, or
// checks it against the one recorded.
func checkPartitions(ctx context.Context, cat *Store, n int) error {
	key := cat.p + "partitions"
	if err := cat.c.SetNX(ctx, key, n, 0).Err(); err != nil {
		return fmt.Errorf("redisstore: open %s: writing %s: %w", cat.addr, key, err)
	}
	v, err := cat.c.Get(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("redisstore: open %s: reading %s: %w", cat.addr, key, err)
	}
	if v != strconv.Itoa(n) {
		return fmt.Errorf("redisstore: open %s: the store under %s has %s partitions, not %d: the number is fixed when a store is created", cat.addr, cat.p, v, n)
	}
	return nil
}

// Partitions returns P.
func (r *Partitioned) Partitions() int { return len(r.parts) }

// Addr returns the address of the Redis the store uses, for messages.
func (r *Partitioned) Addr() string { return r.cat.addr }

// Close stops the background loop and marks every store closed; the
// client stays open (Config.Client is the caller's).
func (r *Partitioned) Close() error {
	if r.closed.CompareAndSwap(false, true) {
		r.stop()
		<-r.done
		for _, p := range r.parts {
			p.Close() //nolint:errcheck // Store.Close never fails
		}
		r.cat.Close() //nolint:errcheck // Store.Close never fails
	}
	return nil
}

func (r *Partitioned) begin(ctx context.Context) error { return r.cat.begin(ctx) }

// whole is the stripe of every partition (stripes.go): the sweeps' reads
// of the whole store.
func (r *Partitioned) whole() *stripe { return &stripe{Partitioned: r, share: r.parts} }

// part returns the partition of instance id.
func (r *Partitioned) part(id string) *Store { return r.parts[partition.Of(id, len(r.parts))] }

// each calls f for every partition at once and returns their errors.
func (r *Partitioned) each(ctx context.Context, f func(ctx context.Context, i int, p *Store) error) error {
	return eachIn(ctx, r.parts, f)
}

// eachIn calls f for every store of parts at once (i is its place in
// parts) and returns their errors.
func eachIn(ctx context.Context, parts []*Store, f func(ctx context.Context, i int, p *Store) error) error {
	if len(parts) == 1 {
		return f(ctx, 0, parts[0])
	}
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i, p := range parts {
		wg.Go(func() { errs[i] = f(ctx, i, p) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// byPartition groups ids by partition, keeping their order.
func (r *Partitioned) byPartition(ids []string) map[int][]string {
	out := make(map[int][]string)
	for _, id := range ids {
		i := partition.Of(id, len(r.parts))
		out[i] = append(out[i], id)
	}
	return out
}

// ---- Instances: routed to their partition.

// Commit implements store.Store. The commit is one script in the
// instance's partition; around it, the router reserves the queued stimulus
// it consumes in the catalog and confirms or releases it after, relays the
// messages it sends to other partitions, and applies its concurrency-slot
// change in the catalog (as a whole store does: after the commit).
func (r *Partitioned) Commit(ctx context.Context, c store.Commit) (uint64, error) {
	if err := r.begin(ctx); err != nil {
		return 0, err
	}
	if c.Instance == nil {
		return r.parts[0].Commit(ctx, c) // its validation names the fault
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	id := c.Instance.ID
	p := r.part(id)
	var remote []bool
	for i, m := range c.Send {
		if r.part(m.InstanceID) != p {
			if remote == nil {
				remote = make([]bool, len(c.Send))
			}
			remote[i] = true
		}
	}
	sid, marker := c.DeliveredStimulus, ""
	if sid != "" {
		now := r.now()
		deadline := now.Add(r.cfg.ReserveFor)
		if err := r.cat.reserveStimulus(ctx, sid, id, now, deadline); err != nil {
			return 0, err
		}
		marker = reservationMarker(sid, deadline)
	}
	slot := c.Slot
	c.Slot = nil
	rev, eids, err := r.commitIn(ctx, p, c, remote, marker)
	if sid != "" {
		r.settleReservation(ctx, sid, id, c.DeliveredOutcome, err)
	}
	if err != nil {
		return 0, err
	}
	if slot != nil {
		// As a whole store applies it: after the commit, which stands
		// whatever the slot's outcome (the sweeps repair the slots).
		slot.Decision, slot.Err = r.cat.UpdateSlots(context.WithoutCancel(ctx), slot.Key, slot.ID, slot.Params, slot.Now, slot.Op)
	}
	r.relayNow(ctx, p, eids)
	return rev, nil
}

// commitIn runs c in partition p. A create that carries no catalog
// generation (one not made from ResolveStart) has its pins checked in the
// catalog first, as a whole store's script checks them, and carries the
// generation read before the check, so that a plugin delete that fences
// the partitions after it refuses the create, which is then checked
// again.
func (r *Partitioned) commitIn(ctx context.Context, p *Store, c store.Commit, remote []bool, marker string) (uint64, []string, error) {
	check := c.Instance.Rev == 0 && c.Catalog == "" && len(c.Instance.Plugins) > 0 && !c.Instance.Status.Terminal()
	for attempt := 0; ; attempt++ {
		if check {
			g, err := r.cat.generation(ctx)
			if err != nil {
				return 0, nil, r.cat.fail(ctx, "read catalog generation", c.Instance.ID, err)
			}
			if err := r.cat.pinsExist(ctx, c.Instance.ID, c.Instance.Plugins); err != nil {
				return 0, nil, err
			}
			c.Catalog = g
		}
		rev, eids, err := p.commitMarked(ctx, c, remote, marker)
		pg, refused := catalogRefusal(err)
		if !refused {
			return rev, eids, err
		}
		err = r.awaitCatalog(ctx, pg, err)
		if !check || attempt == 2 || !errors.Is(err, store.ErrCatalogChanged) {
			return 0, nil, err
		}
	}
}

// settleReservation confirms the stimulus a commit consumed, or releases
// it when the commit was refused. When it cannot tell (a network error:
// the commit may have run), it leaves the reservation to the loop, which
// asks the partition for the commit's marker once it expires.
func (r *Partitioned) settleReservation(ctx context.Context, sid, id string, outcome []byte, commitErr error) {
	ctx = context.WithoutCancel(ctx)
	var ce *store.CommitError
	var err error
	switch {
	case commitErr == nil:
		err = r.cat.confirmStimulus(ctx, sid, id, outcome, r.now())
	case errors.As(commitErr, &ce), errors.Is(commitErr, weft.ErrInvalid), errors.Is(commitErr, store.ErrCatalogChanged):
		err = r.cat.releaseStimulus(ctx, sid, id)
	default:
		return
	}
	if err != nil {
		r.log.Warn("redisstore: settling a stimulus reservation failed; the relay loop will", "stimulus", sid, "instance", id, "err", err)
	}
}

// awaitCatalog handles a create a partition refused because it holds a
// later catalog generation, pg. When the catalog has moved to pg or past
// it, the create read a catalog that changed: ErrCatalogChanged, and the
// engine reads it again. When the catalog is behind pg, pg is a plugin
// delete's barrier: it waits, up to BarrierWait, for the delete to finish
// (the catalog then moves past the barrier), and lifts the barrier itself
// when it does not, taking the deleter for dead (its finish then sees the
// catalog moved, and starts again).
func (r *Partitioned) awaitCatalog(ctx context.Context, pg string, refusal error) error {
	want := generationOrder(pg)
	deadline := time.Now().Add(r.cfg.BarrierWait)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		g, err := r.cat.generation(ctx)
		if err != nil {
			return r.cat.fail(ctx, "read catalog generation", "", err)
		}
		if generationOrder(g) >= want {
			return refusal
		}
		if time.Now().After(deadline) {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	r.log.Warn("redisstore: lifting a plugin delete's barrier its deleter left", "barrier", pg, "waited", r.cfg.BarrierWait)
	if _, err := r.cat.raiseGeneration(ctx, pg); err != nil {
		return err
	}
	return refusal
}

// generationOrder is genOrder (the scripts' prelude) in Go: the counter
// before the ".", 0 for a generation without one.
func generationOrder(g string) uint64 {
	i := strings.IndexByte(g, '.')
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseUint(g[:i], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// GetInstance implements store.Store.
func (r *Partitioned) GetInstance(ctx context.Context, id string) (*weft.Instance, error) {
	return r.part(id).GetInstance(ctx, id)
}

// DeleteInstance implements store.Store.
func (r *Partitioned) DeleteInstance(ctx context.Context, id string, fence uint64) error {
	return r.part(id).DeleteInstance(ctx, id, fence)
}

// History implements store.Store.
func (r *Partitioned) History(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.HistoryEntry, error) {
	return r.part(id).History(ctx, id, afterSeq, limit)
}

// Inbox implements store.Store.
func (r *Partitioned) Inbox(ctx context.Context, id string) ([]weft.Message, error) {
	return r.part(id).Inbox(ctx, id)
}

// Bookmarks implements store.Store.
func (r *Partitioned) Bookmarks(ctx context.Context, id string) ([]weft.Bookmark, error) {
	return r.part(id).Bookmarks(ctx, id)
}

// Timers implements store.Store.
func (r *Partitioned) Timers(ctx context.Context, id string) ([]weft.Timer, error) {
	return r.part(id).Timers(ctx, id)
}

// Heartbeats implements store.Store.
func (r *Partitioned) Heartbeats(ctx context.Context, id string) ([]store.Heartbeat, error) {
	return r.part(id).Heartbeats(ctx, id)
}

// InstanceStatuses implements store.Store: one round trip per partition
// the ids fall in.
func (r *Partitioned) InstanceStatuses(ctx context.Context, ids []string) (map[string]weft.Status, error) {
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]weft.Status, len(ids))
	var mu sync.Mutex
	groups := r.byPartition(ids)
	err := r.each(ctx, func(ctx context.Context, i int, p *Store) error {
		if len(groups[i]) == 0 {
			return nil
		}
		m, err := p.InstanceStatuses(ctx, groups[i])
		mu.Lock()
		defer mu.Unlock()
		for id, st := range m {
			out[id] = st
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CountInstances implements store.Store: the partitions' counts, summed.
func (r *Partitioned) CountInstances(ctx context.Context, workflow string) (map[weft.Status]int, error) {
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	out := make(map[weft.Status]int)
	var mu sync.Mutex
	err := r.each(ctx, func(ctx context.Context, _ int, p *Store) error {
		m, err := p.CountInstances(ctx, workflow)
		mu.Lock()
		defer mu.Unlock()
		for st, n := range m {
			out[st] += n
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RenewLeases implements store.Store: one renewal per partition the ids
// and heartbeats fall in, each one script; the renewed ids come back in
// the order given.
func (r *Partitioned) RenewLeases(ctx context.Context, rn store.LeaseRenewal) ([]string, error) {
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	if err := rn.Validate(); err != nil {
		return nil, err
	}
	groups := make(map[int]*store.LeaseRenewal)
	group := func(id string) *store.LeaseRenewal {
		i := partition.Of(id, len(r.parts))
		g := groups[i]
		if g == nil {
			g = &store.LeaseRenewal{Node: rn.Node, Boot: rn.Boot, Expiry: rn.Expiry}
			groups[i] = g
		}
		return g
	}
	for _, id := range rn.IDs {
		g := group(id)
		g.IDs = append(g.IDs, id)
	}
	for _, h := range rn.Heartbeats {
		g := group(h.InstanceID)
		g.Heartbeats = append(g.Heartbeats, h)
	}
	renewed := make(map[string]bool, len(rn.IDs))
	var mu sync.Mutex
	err := r.each(ctx, func(ctx context.Context, i int, p *Store) error {
		g := groups[i]
		if g == nil {
			return nil
		}
		ids, err := p.RenewLeases(ctx, *g)
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			renewed[id] = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(renewed))
	for _, id := range rn.IDs {
		if renewed[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// FindBookmarks implements store.Store: every partition's, merged in
// (InstanceID, StepPath) order.
func (r *Partitioned) FindBookmarks(ctx context.Context, event, key string) ([]weft.Bookmark, error) {
	all, err := gather(ctx, r, func(ctx context.Context, p *Store) ([]weft.Bookmark, error) {
		return p.FindBookmarks(ctx, event, key)
	})
	slices.SortFunc(all, func(a, b weft.Bookmark) int {
		return cmp.Or(cmp.Compare(a.InstanceID, b.InstanceID), cmp.Compare(a.StepPath, b.StepPath))
	})
	return all, err
}

// DueTimers implements store.Store: up to limit from every partition,
// merged in (Due, InstanceID, ID) order and cut to limit.
func (r *Partitioned) DueTimers(ctx context.Context, now time.Time, limit int) ([]weft.Timer, error) {
	return r.dueTimersIn(ctx, r.parts, now, limit)
}

func (r *Partitioned) dueTimersIn(ctx context.Context, parts []*Store, now time.Time, limit int) ([]weft.Timer, error) {
	all, err := gatherIn(ctx, r, parts, func(ctx context.Context, p *Store) ([]weft.Timer, error) {
		return p.DueTimers(ctx, now, limit)
	})
	slices.SortFunc(all, func(a, b weft.Timer) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.InstanceID, b.InstanceID), cmp.Compare(a.ID, b.ID))
	})
	if limit >= 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, err
}

// WaitingInboxes implements store.Store: up to limit from every
// partition, merged longest waiting first.
func (r *Partitioned) WaitingInboxes(ctx context.Context, before time.Time, limit int) ([]string, error) {
	return r.whole().WaitingInboxes(ctx, before, limit)
}

// ExpiredLeases implements store.Store: up to limit from every partition,
// merged earliest expiry first.
func (r *Partitioned) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	return r.whole().ExpiredLeases(ctx, now, limit)
}

// ExpiredInstances implements store.Store: up to limit from every
// partition, merged by (DeleteAfter, ID).
func (r *Partitioned) ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	return r.whole().ExpiredInstances(ctx, now, limit)
}

// mergeSweep reads a sweep's list from every partition of parts and
// merges them in the order of their keys (sweepkeys.go), up to limit.
func (r *Partitioned) mergeSweep(ctx context.Context, parts []*Store, limit int, read func(ctx context.Context, p *Store) ([]keyedID, error)) ([]string, error) {
	lists, err := collect(ctx, r, parts, read)
	if err != nil {
		return nil, err
	}
	return mergeByKey(lists, limit), nil
}

// gather concatenates every partition's answer.
func gather[T any](ctx context.Context, r *Partitioned, read func(ctx context.Context, p *Store) ([]T, error)) ([]T, error) {
	return gatherIn(ctx, r, r.parts, read)
}

// gatherIn concatenates the answers of parts.
func gatherIn[T any](ctx context.Context, r *Partitioned, parts []*Store, read func(ctx context.Context, p *Store) ([]T, error)) ([]T, error) {
	lists, err := collect(ctx, r, parts, read)
	if err != nil {
		return nil, err
	}
	return slices.Concat(lists...), nil
}

// collect reads a list from every store of parts at once, in the order of
// parts.
func collect[T any](ctx context.Context, r *Partitioned, parts []*Store, read func(ctx context.Context, p *Store) ([]T, error)) ([][]T, error) {
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	lists := make([][]T, len(parts))
	err := eachIn(ctx, parts, func(ctx context.Context, i int, p *Store) error {
		var err error
		lists[i], err = read(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return lists, nil
}

// ---- Messages between stores.

// Deliver implements store.Store: the stimulus is recorded in the catalog
// with its messages in the catalog's outbox, in one script, and relayed to
// the targets' partitions at once. The catalog holds no instance, so the
// router first drops the messages for instances that do not exist (as a
// whole store's script does), and the stimulus's DeliveredTo is the first
// target that does.
func (r *Partitioned) Deliver(ctx context.Context, st *weft.Stimulus, msgs []weft.Message) (*weft.Stimulus, error) {
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	if err := store.ValidateDeliver(st, msgs); err != nil {
		return nil, err
	}
	kept, err := r.existing(ctx, msgs)
	if err != nil {
		return nil, err
	}
	old, eids, err := r.cat.deliverTo(ctx, st, kept)
	if err != nil || old != nil {
		return old, err
	}
	r.relayNow(ctx, r.cat, eids)
	return nil, nil
}

// existing returns the messages of msgs whose target instance exists.
func (r *Partitioned) existing(ctx context.Context, msgs []weft.Message) ([]weft.Message, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(msgs))
	for _, m := range msgs {
		ids = append(ids, m.InstanceID)
	}
	sts, err := r.InstanceStatuses(ctx, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(slices.Clone(msgs), func(m weft.Message) bool { _, ok := sts[m.InstanceID]; return !ok }), nil
}

// relayNow relays the outbox entries eids that src just wrote, read back
// from its outbox. A failure is logged: the entries stay in src's outbox,
// and the loop relays them after RelayAfter.
func (r *Partitioned) relayNow(ctx context.Context, src *Store, eids []string) {
	if len(eids) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	entries, err := src.outboxEntries(ctx, eids)
	if err == nil {
		err = r.relay(ctx, src, entries)
	}
	if err != nil {
		r.log.Warn("redisstore: relaying messages failed; the relay loop will retry", "from", src.p, "messages", len(eids), "err", err)
	}
}

// relay applies entries of src's outbox in their targets' partitions (each
// at most once: the partition remembers what it received) and then
// acknowledges them in src.
func (r *Partitioned) relay(ctx context.Context, src *Store, entries []outboxEntry) error {
	if len(entries) == 0 {
		return nil
	}
	groups := make(map[int][]outboxEntry)
	for _, e := range entries {
		i := partition.Of(e.Target, len(r.parts))
		groups[i] = append(groups[i], e)
	}
	var mu sync.Mutex
	var done []outboxEntry
	err := r.each(ctx, func(ctx context.Context, i int, p *Store) error {
		g := groups[i]
		if len(g) == 0 {
			return nil
		}
		if err := p.receive(ctx, g); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		done = append(done, g...)
		return nil
	})
	if len(done) > 0 {
		err = errors.Join(err, src.ackOutbox(ctx, done))
	}
	return err
}

// ApplyBatchItems implements store.Store: the batch and its items are in
// the catalog, and the messages its changes write go through the catalog's
// outbox, relayed at once. The catalog holds no instance: the router first
// turns the changes of instances that do not exist into skipped items
// (weft.BatchNotFound), as a whole store's script does.
func (r *Partitioned) ApplyBatchItems(ctx context.Context, b *weft.Batch, changes []weft.BatchChange) (*weft.Batch, error) {
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(changes))
	for _, c := range changes {
		ids = append(ids, c.InstanceID)
	}
	sts, err := r.InstanceStatuses(ctx, ids)
	if err != nil {
		return nil, err
	}
	changes = slices.Clone(changes)
	for i, c := range changes {
		if _, ok := sts[c.InstanceID]; !ok {
			changes[i] = weft.BatchChange{InstanceID: c.InstanceID, Outcome: weft.BatchSkipped, Reason: weft.BatchNotFound}
		}
	}
	out, eids, err := r.cat.applyBatchItems(ctx, b, changes)
	if err != nil {
		return nil, err
	}
	r.relayNow(ctx, r.cat, eids)
	return out, nil
}

// ---- Listings.

// ListInstances implements store.Store: every partition's page of the same
// filter and cursor, merged in index order (listInstancesKeyed gives each
// item's place in the walk), never past the nearest place where a
// partition stopped with more to read.
func (r *Partitioned) ListInstances(ctx context.Context, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	return r.listIn(ctx, r.parts, f)
}

// listIn is ListInstances over the partitions parts.
func (r *Partitioned) listIn(ctx context.Context, parts []*Store, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	if err := r.begin(ctx); err != nil {
		return nil, "", err
	}
	type page struct {
		items []weft.Instance
		keys  []string
		next  string
	}
	before := func(a, b string) bool { // a comes before b in the walk
		if f.NewestFirst {
			return a > b
		}
		return a < b
	}
	// With Match or Search, f.Examine bounds what the whole call reads: the
	// walks first read the next Examine entries' keys (members only), and
	// each partition then reads its entries up to the Examine-th of all,
	// stop, and no further; the partitions with none before it are not
	// read. Examine 0 (weft.MaxExamine) skips this: each partition reads up
	// to MaxExamine.
	stop, skip := "", make([]bool, len(parts))
	if (f.Match != nil || f.Search != nil) && f.Examine > 0 {
		walks := make([][]string, len(parts))
		if err := eachIn(ctx, parts, func(ctx context.Context, i int, p *Store) error {
			var err error
			walks[i], err = p.walkKeys(ctx, f, f.Examine)
			return err
		}); err != nil {
			return nil, "", err
		}
		all := slices.Concat(walks...)
		if len(all) >= f.Examine {
			slices.SortFunc(all, func(a, b string) int {
				switch {
				case a == b:
					return 0
				case before(a, b):
					return -1
				}
				return 1
			})
			stop = all[f.Examine-1]
			for i, w := range walks {
				skip[i] = len(w) == 0 || before(stop, w[0])
			}
		}
	}
	pages := make([]page, len(parts))
	err := eachIn(ctx, parts, func(ctx context.Context, i int, p *Store) error {
		if skip[i] {
			return nil
		}
		items, keys, next, err := p.listInstancesUntil(ctx, f, stop)
		pages[i] = page{items, keys, next}
		return err
	})
	if err != nil {
		return nil, "", err
	}
	// The bound: no partition is read past the nearest place one of them
	// stopped with more to read.
	bound, bounded := "", false
	for _, pg := range pages {
		if pg.next == "" {
			continue
		}
		k, err := cursorKey(pg.next)
		if err != nil {
			return nil, "", err
		}
		if !bounded || before(k, bound) {
			bound, bounded = k, true
		}
	}
	type keyed struct {
		in  weft.Instance
		key string
	}
	var all []keyed
	for _, pg := range pages {
		for j, in := range pg.items {
			if bounded && before(bound, pg.keys[j]) {
				continue
			}
			all = append(all, keyed{in, pg.keys[j]})
		}
	}
	slices.SortFunc(all, func(a, b keyed) int {
		switch {
		case a.key == b.key:
			return 0
		case before(a.key, b.key):
			return -1
		}
		return 1
	})
	limit := weft.ClampLimit(f.Limit)
	next := ""
	if len(all) > limit {
		all = all[:limit]
		next = keyCursor(all[limit-1].key)
	} else if bounded {
		next = keyCursor(bound)
	}
	out := make([]weft.Instance, len(all))
	for i, k := range all {
		out[i] = k.in
	}
	return out, next, nil
}

// ---- The catalog, and what a change of it must tell the partitions.

// spread copies the catalog's generation into every partition after a
// change of the catalog, so that a create carrying a generation read
// before the change is refused in any partition once the change is
// answered. A partition it misses catches up with the first create that
// read the new catalog; the error says the change is made but not yet
// known everywhere.
func (r *Partitioned) spread(ctx context.Context, what string) error {
	ctx = context.WithoutCancel(ctx)
	g, err := r.cat.generation(ctx)
	if err != nil {
		return fmt.Errorf("redisstore: %s: done, but reading the catalog generation to tell the partitions failed: %w", what, err)
	}
	return r.copyGeneration(ctx, g, what)
}

func (r *Partitioned) copyGeneration(ctx context.Context, g, what string) error {
	if err := r.each(ctx, func(ctx context.Context, _ int, p *Store) error { return p.copyGeneration(ctx, g) }); err != nil {
		return fmt.Errorf("redisstore: %s: done, but telling every partition of the catalog's generation %s failed: %w", what, g, err)
	}
	return nil
}

// PutDefinition implements store.Store.
func (r *Partitioned) PutDefinition(ctx context.Context, name, hash string, source []byte) (int, bool, error) {
	v, created, err := r.cat.PutDefinition(ctx, name, hash, source)
	if err == nil && created {
		err = r.spread(ctx, "save definition "+name)
	}
	return v, created, err
}

// DeleteDefinition implements store.Store.
func (r *Partitioned) DeleteDefinition(ctx context.Context, name string) error {
	if err := r.cat.DeleteDefinition(ctx, name); err != nil {
		return err
	}
	return r.spread(ctx, "delete definition "+name)
}

// PutPlugin implements store.Store.
func (r *Partitioned) PutPlugin(ctx context.Context, rec weft.PluginRecord) (bool, error) {
	created, err := r.cat.PutPlugin(ctx, rec)
	if err == nil && created {
		err = r.spread(ctx, "save plugin "+rec.Name)
	}
	return created, err
}

// PauseWorkflow implements store.Store.
func (r *Partitioned) PauseWorkflow(ctx context.Context, p weft.WorkflowPause) (*weft.WorkflowPause, error) {
	out, err := r.cat.PauseWorkflow(ctx, p)
	if err == nil {
		err = r.spread(ctx, "pause workflow "+p.Workflow)
	}
	return out, err
}

// UnpauseWorkflow implements store.Store.
func (r *Partitioned) UnpauseWorkflow(ctx context.Context, name string) (*weft.WorkflowPause, error) {
	out, err := r.cat.UnpauseWorkflow(ctx, name)
	if err == nil {
		err = r.spread(ctx, "unpause workflow "+name)
	}
	return out, err
}

// DeletePlugin implements store.Store: the plugin's pins are in the
// partitions, so the delete fences them first (plugindelete.go): the
// catalog moves to a new generation and every partition gets a barrier
// after it, which refuses every create that read the catalog before the
// delete finishes; the router then asks every partition which instances
// pin the plugin, and the catalog deletes it only if none does and nothing
// changed the catalog meanwhile (else it starts again).
func (r *Partitioned) DeletePlugin(ctx context.Context, name string) error {
	if err := r.begin(ctx); err != nil {
		return err
	}
	const attempts = 5
	for range attempts {
		gen, barrier, err := r.cat.beginPluginDelete(ctx, name)
		if err != nil {
			return err
		}
		if err := r.copyGeneration(ctx, barrier, "delete plugin "+name); err != nil {
			_, lerr := r.cat.raiseGeneration(context.WithoutCancel(ctx), barrier)
			return errors.Join(err, lerr)
		}
		users, err := gather(ctx, r, func(ctx context.Context, p *Store) ([]string, error) {
			return p.pinsOf(ctx, name, weft.MaxInUseListed)
		})
		if err != nil {
			_, lerr := r.cat.raiseGeneration(context.WithoutCancel(ctx), barrier)
			return errors.Join(err, lerr)
		}
		slices.Sort(users)
		if len(users) > weft.MaxInUseListed {
			users = users[:weft.MaxInUseListed]
		}
		err = r.cat.finishPluginDelete(ctx, name, gen, users)
		if errors.Is(err, errCatalogMoved) {
			continue
		}
		if serr := r.spread(ctx, "delete plugin "+name); err == nil {
			err = serr
		}
		return err
	}
	return fmt.Errorf("redisstore: delete plugin %s: the catalog changed during each of %d attempts: %w", name, attempts, weft.ErrConflict)
}

// ResolveStart implements store.Store. An answer read now (not cached)
// carries the generation read before it, so that a partition can refuse
// the create when the catalog changed since (a whole store checks the
// pins instead, which a partition cannot).
func (r *Partitioned) ResolveStart(ctx context.Context, workflow string, uses func(*weft.Definition) ([]string, error), cached bool) (*store.StartCatalog, error) {
	if cached {
		return r.cat.ResolveStart(ctx, workflow, uses, true)
	}
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	g, err := r.cat.generation(ctx)
	if err != nil {
		return nil, r.cat.fail(ctx, "read catalog generation", workflow, err)
	}
	sc, err := r.cat.ResolveStart(ctx, workflow, uses, false)
	if err != nil {
		return nil, err
	}
	sc.Generation = g
	return sc, nil
}

// GetDefinition implements store.Store.
func (r *Partitioned) GetDefinition(ctx context.Context, name string, version int) (*weft.Definition, error) {
	return r.cat.GetDefinition(ctx, name, version)
}

// ListDefinitions implements store.Store.
func (r *Partitioned) ListDefinitions(ctx context.Context, cursor string, limit int) ([]weft.Definition, string, error) {
	return r.cat.ListDefinitions(ctx, cursor, limit)
}

// ListDefinitionVersions implements store.Store.
func (r *Partitioned) ListDefinitionVersions(ctx context.Context, name string) ([]weft.Definition, error) {
	return r.cat.ListDefinitionVersions(ctx, name)
}

// RegisterSearchAttributes implements store.Store.
func (r *Partitioned) RegisterSearchAttributes(ctx context.Context, workflow string, attrs map[string]weft.SearchType) error {
	return r.cat.RegisterSearchAttributes(ctx, workflow, attrs)
}

// SearchAttributes implements store.Store.
func (r *Partitioned) SearchAttributes(ctx context.Context) ([]weft.SearchAttribute, error) {
	return r.cat.SearchAttributes(ctx)
}

// GetPlugin implements store.Store.
func (r *Partitioned) GetPlugin(ctx context.Context, name string) (*weft.Plugin, error) {
	return r.cat.GetPlugin(ctx, name)
}

// CurrentPlugin implements store.Store.
func (r *Partitioned) CurrentPlugin(ctx context.Context, name string) (*weft.PluginRecord, error) {
	return r.cat.CurrentPlugin(ctx, name)
}

// ListPlugins implements store.Store.
func (r *Partitioned) ListPlugins(ctx context.Context, cursor string, limit int) ([]weft.PluginRecord, string, error) {
	return r.cat.ListPlugins(ctx, cursor, limit)
}

// PutGrants implements store.Store.
func (r *Partitioned) PutGrants(ctx context.Context, plugin string, doc []byte, ifRevision uint64) (uint64, error) {
	return r.cat.PutGrants(ctx, plugin, doc, ifRevision)
}

// GetGrants implements store.Store.
func (r *Partitioned) GetGrants(ctx context.Context, plugin string) (*weft.Grants, error) {
	return r.cat.GetGrants(ctx, plugin)
}

// ListGrants implements store.Store.
func (r *Partitioned) ListGrants(ctx context.Context, cursor string, limit int) ([]weft.Grants, string, error) {
	return r.cat.ListGrants(ctx, cursor, limit)
}

// DeleteGrants implements store.Store.
func (r *Partitioned) DeleteGrants(ctx context.Context, plugin string) error {
	return r.cat.DeleteGrants(ctx, plugin)
}

// WorkflowPauses implements store.Store.
func (r *Partitioned) WorkflowPauses(ctx context.Context) ([]weft.WorkflowPause, error) {
	return r.cat.WorkflowPauses(ctx)
}

// GetWorkflowPause implements store.Store.
func (r *Partitioned) GetWorkflowPause(ctx context.Context, name string) (*weft.WorkflowPause, error) {
	return r.cat.GetWorkflowPause(ctx, name)
}

// EnqueueStimulus implements store.Store.
func (r *Partitioned) EnqueueStimulus(ctx context.Context, s weft.Stimulus) (*weft.Stimulus, error) {
	return r.cat.EnqueueStimulus(ctx, s)
}

// GetStimulus implements store.Store.
func (r *Partitioned) GetStimulus(ctx context.Context, id string) (*weft.Stimulus, error) {
	return r.cat.GetStimulus(ctx, id)
}

// PendingStimuli implements store.Store.
func (r *Partitioned) PendingStimuli(ctx context.Context, name, key string) ([]weft.Stimulus, error) {
	return r.cat.PendingStimuli(ctx, name, key)
}

// QueuedStimuli implements store.Store.
func (r *Partitioned) QueuedStimuli(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	return r.cat.QueuedStimuli(ctx, cursor, limit)
}

// ExpireStimuli implements store.Store.
func (r *Partitioned) ExpireStimuli(ctx context.Context, now time.Time, limit int) ([]weft.Stimulus, error) {
	return r.cat.ExpireStimuli(ctx, now, limit)
}

// DeadLetters implements store.Store.
func (r *Partitioned) DeadLetters(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	return r.cat.DeadLetters(ctx, cursor, limit)
}

// CreateSchedule implements store.Store.
func (r *Partitioned) CreateSchedule(ctx context.Context, s *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error) {
	return r.cat.CreateSchedule(ctx, s, events)
}

// GetSchedule implements store.Store.
func (r *Partitioned) GetSchedule(ctx context.Context, id string) (*weft.Schedule, error) {
	return r.cat.GetSchedule(ctx, id)
}

// ListSchedules implements store.Store.
func (r *Partitioned) ListSchedules(ctx context.Context, cursor string, limit int) ([]weft.Schedule, string, error) {
	return r.cat.ListSchedules(ctx, cursor, limit)
}

// UpdateSchedule implements store.Store.
func (r *Partitioned) UpdateSchedule(ctx context.Context, s *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error) {
	return r.cat.UpdateSchedule(ctx, s, events)
}

// DeleteSchedule implements store.Store.
func (r *Partitioned) DeleteSchedule(ctx context.Context, id string) error {
	return r.cat.DeleteSchedule(ctx, id)
}

// DueSchedules implements store.Store.
func (r *Partitioned) DueSchedules(ctx context.Context, now time.Time, limit int) ([]weft.Schedule, error) {
	return r.cat.DueSchedules(ctx, now, limit)
}

// ScheduleEvents implements store.Store.
func (r *Partitioned) ScheduleEvents(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.ScheduleEvent, error) {
	return r.cat.ScheduleEvents(ctx, id, afterSeq, limit)
}

// CreateBatch implements store.Store.
func (r *Partitioned) CreateBatch(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, error) {
	return r.cat.CreateBatch(ctx, b, ids)
}

// GetBatch implements store.Store.
func (r *Partitioned) GetBatch(ctx context.Context, id string) (*weft.Batch, error) {
	return r.cat.GetBatch(ctx, id)
}

// ListBatches implements store.Store.
func (r *Partitioned) ListBatches(ctx context.Context, cursor string, limit int) ([]weft.Batch, string, error) {
	return r.cat.ListBatches(ctx, cursor, limit)
}

// UpdateBatch implements store.Store.
func (r *Partitioned) UpdateBatch(ctx context.Context, b *weft.Batch) (*weft.Batch, error) {
	return r.cat.UpdateBatch(ctx, b)
}

// DeleteBatch implements store.Store.
func (r *Partitioned) DeleteBatch(ctx context.Context, id string) error {
	return r.cat.DeleteBatch(ctx, id)
}

// DueBatches implements store.Store.
func (r *Partitioned) DueBatches(ctx context.Context, now time.Time, limit int) ([]weft.Batch, error) {
	return r.cat.DueBatches(ctx, now, limit)
}

// AddBatchItems implements store.Store.
func (r *Partitioned) AddBatchItems(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, int, error) {
	return r.cat.AddBatchItems(ctx, b, ids)
}

// BatchItems implements store.Store.
func (r *Partitioned) BatchItems(ctx context.Context, batch string, f weft.BatchItemFilter) ([]weft.BatchItem, error) {
	return r.cat.BatchItems(ctx, batch, f)
}

// UpdateSlots implements store.Store.
func (r *Partitioned) UpdateSlots(ctx context.Context, key, id string, p slots.Params, now time.Time, op store.SlotOp) (slots.Decision, error) {
	return r.cat.UpdateSlots(ctx, key, id, p, now, op)
}

// SlotKeys implements store.Store.
func (r *Partitioned) SlotKeys(ctx context.Context, prefix, cursor string, limit int) ([]store.SlotKey, string, error) {
	return r.cat.SlotKeys(ctx, prefix, cursor, limit)
}

// SlotLine implements store.Store.
func (r *Partitioned) SlotLine(ctx context.Context, key, cursor string, limit int) ([]slots.Waiter, string, error) {
	return r.cat.SlotLine(ctx, key, cursor, limit)
}

// BarrierOf waits, as Store.Barrier does, on the partition of instance
// id alone: a master without its replicas elsewhere does not hold up an
// answer about an instance it does not hold.
func (r *Partitioned) BarrierOf(ctx context.Context, id string) error {
	return r.part(id).Barrier(ctx)
}

// ---- The loop that finishes what crashed writers left.

// run relays the outbox entries older than RelayAfter and settles the
// stimulus reservations past their deadline, every RelayInterval, until
// Close. Every node runs it: a relay applies once whoever runs it.
func (r *Partitioned) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.cfg.RelayInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.sweep(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("redisstore: the relay loop failed; it runs again", "err", err)
		}
	}
}

// sweep is one turn of run.
func (r *Partitioned) sweep(ctx context.Context) error {
	const page = 500
	before := r.now().Add(-r.cfg.RelayAfter)
	var errs []error
	for _, src := range append([]*Store{r.cat}, r.parts...) {
		entries, err := src.pendingOutbox(ctx, before, page)
		if err == nil {
			err = r.relay(ctx, src, entries)
		}
		errs = append(errs, err)
	}
	res, err := r.cat.expiredReservations(ctx, r.now(), page)
	errs = append(errs, err)
	for _, rv := range res {
		outcome, ok, err := r.part(rv.Instance).settleMarker(ctx, reservationMarker(rv.Stimulus, rv.Deadline))
		switch {
		case err != nil:
		case ok:
			err = r.cat.confirmStimulus(ctx, rv.Stimulus, rv.Instance, outcome, r.now())
		default:
			err = r.cat.releaseStimulus(ctx, rv.Stimulus, rv.Instance)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
