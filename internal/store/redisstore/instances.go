package redisstore

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/store"
)

// args builds a script's ARGV, starting with the key prefix.
type args []any

func (s *Store) args(vs ...any) args { return append(args{s.p}, vs...) }

func (a args) add(vs ...any) args { return append(a, vs...) }

// run runs a script with the schema key as KEYS[1]: every key of the
// store has its slot, so it routes the call on a cluster.
func (s *Store) run(ctx context.Context, sc *redis.Script, a args) *redis.Cmd {
	return sc.Run(ctx, s.c, []string{s.p + "schema"}, a...)
}

// refusal reads a script's {reason, ...} answer; ok is false when the
// answer is not a list starting with a string.
func refusal(v any) (reason string, rest []any, ok bool) {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return "", nil, false
	}
	reason, ok = l[0].(string)
	return reason, l[1:], ok
}

func u64(v any) uint64 {
	switch v := v.(type) {
	case string:
		n, _ := strconv.ParseUint(v, 10, 64)
		return n
	case int64:
		return uint64(v)
	}
	return 0
}

// commitError builds the *store.CommitError of a refusal carrying the
// stored rev and fence.
func commitError(id string, reason error, rest []any) *store.CommitError {
	ce := &store.CommitError{InstanceID: id, Err: reason}
	if len(rest) >= 2 {
		ce.Rev, ce.Fence = u64(rest[0]), u64(rest[1])
	}
	return ce
}

// docOf is the JSON kept under "doc": the engine's fields of the instance.
// The store's own fields (Rev, Fence, times, Lease) and State are kept in
// fields of their own, which scripts read and write.
func docOf(in weft.Instance) ([]byte, error) {
	in.State = nil
	in.Rev, in.Fence = 0, 0
	in.CreatedAt, in.UpdatedAt = time.Time{}, time.Time{}
	in.Lease = weft.Lease{}
	return store.EncodeInstance(in)
}

// bookmarkMember is a bookmark in the bk index (and b:<id>): ordered by
// (event, key, instance, step), then the record.
func bookmarkMember(b weft.Bookmark) (string, error) {
	raw, err := json.Marshal(b)
	if err != nil {
		return "", err
	}
	return string(append(tup(nil, b.Event, b.Key, b.InstanceID, b.StepPath), raw...)), nil
}

func parseBookmark(m string) (weft.Bookmark, error) {
	rest := m
	for range 4 {
		var ok bool
		if _, rest, ok = untup(rest); !ok {
			return weft.Bookmark{}, fmt.Errorf("corrupt bookmark member %q", m)
		}
	}
	var b weft.Bookmark
	if err := json.Unmarshal([]byte(rest), &b); err != nil {
		return b, fmt.Errorf("corrupt bookmark %q: %w", m, err)
	}
	return b, nil
}

// timerMember is a timer in the due index (and t:<id>): ordered by (due,
// instance, id), then the record.
func timerMember(t weft.Timer) (string, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	return hexTime(t.Due) + string(append(tup(nil, t.InstanceID, t.ID), raw...)), nil
}

func parseTimer(m string) (weft.Timer, error) {
	if len(m) < 16 {
		return weft.Timer{}, fmt.Errorf("corrupt timer member %q", m)
	}
	rest := m[16:]
	for range 2 {
		var ok bool
		if _, rest, ok = untup(rest); !ok {
			return weft.Timer{}, fmt.Errorf("corrupt timer member %q", m)
		}
	}
	var t weft.Timer
	if err := json.Unmarshal([]byte(rest), &t); err != nil {
		return t, fmt.Errorf("corrupt timer %q: %w", m, err)
	}
	return t, nil
}

// parseMessage reads a message in an inbox hash: "<seq>|<record>" (the
// script assigns the seq).
func parseMessage(id, v string) (weft.Message, error) {
	var m weft.Message
	i := 0
	for i < len(v) && v[i] != '|' {
		i++
	}
	seq, err := strconv.ParseUint(v[:i], 10, 64)
	if err != nil || i == len(v) {
		return m, fmt.Errorf("instance %q: corrupt inbox entry %q", id, v)
	}
	if err := json.Unmarshal([]byte(v[i+1:]), &m); err != nil {
		return m, fmt.Errorf("instance %q: corrupt message: %w", id, err)
	}
	m.Seq = seq
	return m, nil
}

// messageArgs appends (target, id, record) for each message.
func messageArgs(a args, msgs []weft.Message, now time.Time) (args, error) {
	a = a.add(len(msgs))
	for _, m := range msgs {
		m.Seq, m.CreatedAt = 0, now
		raw, err := jsonv.Marshal(m) // the payload keeps its bytes
		if err != nil {
			return nil, err
		}
		a = a.add(m.InstanceID, m.ID, raw)
	}
	return a, nil
}

// Commit implements store.Store: one script does every check and then
// every write. Every message it sends is for an instance of this store.
func (s *Store) Commit(ctx context.Context, c store.Commit) (uint64, error) {
	rev, _, err := s.commitTo(ctx, c, nil)
	return rev, err
}

// commitTo is Commit for the router of a partitioned store, whose
// instances' messages may be for other partitions: remote[i] true sends
// c.Send[i] into this store's outbox (outbox.go) instead of an inbox
// here, and eids are those entries' ids, in order, for the router to
// relay. remote nil (or empty) means every message is local. In
// rolePartition the commit also differs as commitScript says (the catalog
// generation, the pins, the delivered stimulus's marker), a catalog
// refusal carries the partition's generation (catalogRefusal), and
// c.Slot is left to the router: the slots are in the catalog.
func (s *Store) commitTo(ctx context.Context, c store.Commit, remote []bool) (rev uint64, eids []string, err error) {
	return s.commitMarked(ctx, c, remote, c.DeliveredStimulus)
}

// commitMarked is commitTo with the name of the delivered stimulus's
// marker in a partition: the router names it after the stimulus and its
// reservation (reservationMarker), so that a reservation the sweep
// released, and marked so, refuses that attempt's commit alone, not a
// later reservation's.
func (s *Store) commitMarked(ctx context.Context, c store.Commit, remote []bool, marker string) (rev uint64, eids []string, err error) {
	if err := s.begin(ctx); err != nil {
		return 0, nil, err
	}
	if err := c.Validate(); err != nil {
		return 0, nil, err
	}
	if len(remote) > 0 && len(remote) != len(c.Send) {
		return 0, nil, fmt.Errorf("redisstore: commit instance %q: %d remote flags for %d messages", c.Instance.ID, len(remote), len(c.Send))
	}
	in := *c.Instance
	id := in.ID
	now := s.now()
	in.DeleteAfter = in.DeleteAfter.UTC()
	sa, err := searchField(id, in.Search)
	if err != nil {
		return 0, nil, err
	}
	doc, err := docOf(in)
	if err != nil {
		return 0, nil, fmt.Errorf("redisstore: instance %q: %w", id, err)
	}
	updated := now
	if !c.At.IsZero() {
		updated = c.At.UTC()
	}
	created := updated
	if !in.CreatedAt.IsZero() {
		created = in.CreatedAt
	}
	le := ""
	if !in.Lease.IsZero() {
		le = hexTime(in.Lease.Expiry)
	}
	terminal := "0"
	if in.Status.Terminal() {
		terminal = "1"
	}
	bmFlag, tmFlag := "0", "0"
	if c.Bookmarks != nil {
		bmFlag = "1"
	}
	if c.Timers != nil {
		tmFlag = "1"
	}
	drains := "0"
	if c.Drains {
		drains = "1"
	}
	deleteAfter := ""
	if !in.DeleteAfter.IsZero() {
		deleteAfter = hexTime(in.DeleteAfter)
	}
	// Which messages go into the outbox: one "0" or "1" per message.
	var flags []byte
	for _, r := range remote {
		flags = append(flags, '0')
		if r {
			flags[len(flags)-1] = '1'
		}
	}
	a := s.args(id, strconv.FormatUint(in.Rev, 10), strconv.FormatUint(c.Fence, 10), hexTime(now),
		doc, in.State, string(in.Status), terminal, in.Workflow, hexTime(created),
		in.Lease.Node, in.Lease.Boot, le,
		stimulusArg(s.cfg.role, c.DeliveredStimulus, marker), []byte(compact(c.DeliveredOutcome)), hexTime(now.Add(s.cfg.DeliveredRetention)),
		bmFlag, tmFlag, deleteAfter, hexTime(updated), drains, c.Catalog, sa,
		s.cfg.role.String(), flags, max(s.cfg.DeliveredRetention.Milliseconds(), 1))

	names := make([]string, 0, len(in.Plugins))
	for name := range in.Plugins {
		names = append(names, name)
	}
	slices.Sort(names)
	a = a.add(len(names))
	for _, name := range names {
		a = a.add(name, in.Plugins[name])
	}

	a = a.add(len(c.History))
	for _, e := range c.History {
		e.Seq = 0
		if e.Time.IsZero() {
			e.Time = now
		}
		e.Time = e.Time.UTC()
		raw, err := store.EncodeHistory(e)
		if err != nil {
			return 0, nil, fmt.Errorf("redisstore: instance %q: event: %w", id, err)
		}
		a = a.add(raw)
	}

	// One bookmark per (step, event, key): the last given wins, as a
	// keyed write would.
	bms := map[[3]string]string{}
	for _, b := range c.Bookmarks {
		b.InstanceID = id
		m, err := bookmarkMember(b)
		if err != nil {
			return 0, nil, fmt.Errorf("redisstore: instance %q: bookmark: %w", id, err)
		}
		bms[[3]string{b.StepPath, b.Event, b.Key}] = m
	}
	a = a.add(len(bms))
	for _, m := range bms {
		a = a.add(m)
	}

	a = a.add(len(c.Timers))
	for _, t := range c.Timers {
		t.InstanceID = id
		t.Due = t.Due.UTC()
		m, err := timerMember(t)
		if err != nil {
			return 0, nil, fmt.Errorf("redisstore: instance %q: timer: %w", id, err)
		}
		a = a.add(m)
	}

	a = a.add(len(c.Consumed))
	for _, mid := range c.Consumed {
		a = a.add(mid)
	}
	if a, err = messageArgs(a, c.Send, now); err != nil {
		return 0, nil, fmt.Errorf("redisstore: instance %q: message: %w", id, err)
	}

	res, err := s.write(ctx, commitScript, a).Result()
	if err != nil {
		return 0, nil, s.fail(ctx, "commit instance", id, err)
	}
	reason, rest, ok := refusal(res)
	if !ok {
		return 0, nil, fmt.Errorf("redisstore: commit instance %q on %s: unexpected answer %v", id, s.addr, res)
	}
	switch reason {
	case "ok":
		if sc := c.Slot; sc != nil && s.cfg.role != rolePartition {
			// After the commit, not in its script: the slots run the Go
			// core (UpdateSlots); a failure leaves the commit standing.
			sc.Decision, sc.Err = s.UpdateSlots(context.WithoutCancel(ctx), sc.Key, sc.ID, sc.Params, sc.Now, sc.Op)
		}
		for _, e := range rest[1:] {
			eid, _ := e.(string)
			eids = append(eids, eid)
		}
		return u64(rest[0]), eids, nil
	case "exists":
		return 0, nil, commitError(id, weft.ErrExists, rest)
	case "notfound":
		return 0, nil, commitError(id, weft.ErrNotFound, nil)
	case "fenced":
		return 0, nil, commitError(id, weft.ErrFenced, rest)
	case "conflict":
		return 0, nil, commitError(id, weft.ErrConflict, rest)
	case "notqueued":
		return 0, nil, &store.CommitError{InstanceID: id, Err: store.ErrNotQueued, Stimulus: c.DeliveredStimulus}
	case "inbox":
		return 0, nil, commitError(id, store.ErrInboxNotEmpty, rest)
	case "catalog":
		ce := commitError(id, store.ErrCatalogChanged, nil)
		if len(rest) > 0 { // a partition's refusal names its generation
			gen, _ := rest[0].(string)
			return 0, nil, &catalogRefusedError{ce: ce, gen: gen}
		}
		return 0, nil, ce
	case "noplugin":
		return 0, nil, store.NotFound("instance %q pins plugin %q version %s", id, rest[0], rest[1])
	}
	return 0, nil, fmt.Errorf("redisstore: commit instance %q on %s: unexpected answer %v", id, s.addr, res)
}

// catalogRefusedError is a partition's refusal of a create that read an older
// catalog generation than the partition holds: the *store.CommitError
// (ErrCatalogChanged), which it unwraps to, and the partition's
// generation, which the router reads (catalogRefusal) to know how far
// the catalog it reads from must have come before it retries.
type catalogRefusedError struct {
	ce  *store.CommitError
	gen string
}

// Error implements error.
func (e *catalogRefusedError) Error() string {
	return fmt.Sprintf("%v (the partition holds catalog generation %q)", e.ce, e.gen)
}

// Unwrap returns the commit error, so that errors.Is(err,
// store.ErrCatalogChanged) and errors.As(err, **store.CommitError) hold.
func (e *catalogRefusedError) Unwrap() error { return e.ce }

// catalogRefusal returns the partition's catalog generation that a
// commitTo error carries, and whether it carries one (a partition's
// catalog refusal).
func catalogRefusal(err error) (string, bool) {
	var r *catalogRefusedError
	if errors.As(err, &r) {
		return r.gen, true
	}
	return "", false
}

// compact returns v compacted (v is valid JSON: Validate checked it).
func compact(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	return raw
}

// instanceFields are the fields of an instance hash that make an
// Instance, in the order getInstanceScript and listInstancesScript return
// them; the lease (from the l hash) follows them.
var instanceFields = []string{"doc", "rev", "fence", "ct", "ut"}

// decodeInstance builds an instance from the values of instanceFields and
// the lease.
func decodeInstance(id string, vals []any) (*weft.Instance, error) {
	str := func(i int) string {
		if i < len(vals) {
			if v, ok := vals[i].(string); ok {
				return v
			}
		}
		return ""
	}
	var in weft.Instance
	if err := json.Unmarshal([]byte(str(0)), &in); err != nil {
		return nil, fmt.Errorf("instance %q: corrupt record: %w", id, err)
	}
	in.Rev, in.Fence = u64(str(1)), u64(str(2))
	var err error
	if in.CreatedAt, err = parseHexTime(str(3)); err != nil {
		return nil, fmt.Errorf("instance %q: created: %w", id, err)
	}
	if in.UpdatedAt, err = parseHexTime(str(4)); err != nil {
		return nil, fmt.Errorf("instance %q: updated: %w", id, err)
	}
	if v := str(len(instanceFields)); v != "" {
		if in.Lease, err = parseLease(v); err != nil {
			return nil, fmt.Errorf("instance %q: %w", id, err)
		}
	}
	return &in, nil
}

// parseLease decodes a value of the l hash: the expiry (16 hex digits),
// the terminal flag, the boot's length, ":", the boot and the node (the
// scripts' lease function).
func parseLease(v string) (weft.Lease, error) {
	bad := fmt.Errorf("corrupt lease %q", v)
	if len(v) < 19 {
		return weft.Lease{}, bad
	}
	exp, err := parseHexTime(v[:16])
	if err != nil {
		return weft.Lease{}, bad
	}
	rest := v[17:]
	i := strings.IndexByte(rest, ':')
	if i < 1 {
		return weft.Lease{}, bad
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil || n < 0 || n > len(rest)-i-1 {
		return weft.Lease{}, bad
	}
	l := weft.Lease{Boot: rest[i+1 : i+1+n], Node: rest[i+1+n:], Expiry: exp}
	if l.Node == "" {
		return weft.Lease{}, bad
	}
	return l, nil
}

// GetInstance implements store.Store. An instance without a lease (field
// lh) is one HMGET; one with a lease is read again, with its lease, by a
// script, so that the two are read at one moment.
func (s *Store) GetInstance(ctx context.Context, id string) (*weft.Instance, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	// instanceFields, then lh (the lease: see getInstanceScript), state
	// and ws.
	n := len(instanceFields)
	vals, err := s.c.HMGet(ctx, s.p+"i:"+id, slices.Concat(instanceFields, []string{"lh", "state", "ws"})...).Result()
	if err != nil {
		return nil, s.fail(ctx, "get instance", id, err)
	}
	if vals[0] == nil {
		return nil, store.NotFound("instance %q", id)
	}
	if vals[n] == "1" {
		if vals, err = s.run(ctx, getInstanceScript, s.args(id)).Slice(); err != nil {
			return nil, s.fail(ctx, "get instance", id, err)
		}
		if len(vals) != n+3 {
			return nil, fmt.Errorf("redisstore: get instance %q on %s: unexpected answer %v", id, s.addr, vals)
		}
		if vals[0] == nil {
			return nil, store.NotFound("instance %q", id)
		}
	} else {
		vals[n] = nil // no lease
	}
	in, err := decodeInstance(id, vals)
	if err != nil {
		return nil, s.corrupt(err)
	}
	if st, ok := vals[n+1].(string); ok && st != "" {
		in.State = []byte(st)
	}
	ws, _ := vals[n+2].(string)
	in.InboxWaiting = ws != ""
	return in, nil
}

func (s *Store) corrupt(err error) error { return fmt.Errorf("redisstore: %s: %w", s.addr, err) }

func encodeCursor(k string) string { return base64.RawURLEncoding.EncodeToString([]byte(k)) }

func decodeCursor(c string, minLen int) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < minLen || len(b) == 0 {
		return "", store.Invalid("bad cursor %q", c)
	}
	return string(b), nil
}

// InstanceStatuses implements store.Store: one round trip reads the
// records, of which only the status is decoded.
func (s *Store) InstanceStatuses(ctx context.Context, ids []string) (map[string]weft.Status, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	cmds := make([]*redis.StringCmd, len(ids))
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, s.p+"i:"+id, "doc")
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "statuses of instances", fmt.Sprintf("%d ids", len(ids)), err)
	}
	out := make(map[string]weft.Status, len(ids))
	for i, c := range cmds {
		doc, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, s.fail(ctx, "status of instance", ids[i], err)
		}
		var r struct {
			Status weft.Status `json:"status"`
		}
		if err := json.Unmarshal([]byte(doc), &r); err != nil {
			return nil, s.corrupt(fmt.Errorf("instance %q: corrupt record: %w", ids[i], err))
		}
		out[ids[i]] = r.Status
	}
	return out, nil
}

// CountInstances implements store.Store: the sizes of the status indexes,
// in one round trip.
func (s *Store) CountInstances(ctx context.Context, workflow string) (map[weft.Status]int, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	sts := weft.Statuses()
	cmds := make([]*redis.IntCmd, len(sts))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, st := range sts {
			cmds[i] = p.ZCard(ctx, s.p+statusIndex(st, workflow))
		}
		return nil
	})
	if err != nil {
		return nil, s.fail(ctx, "count instances", workflow, err)
	}
	counts := map[weft.Status]int{}
	for i, c := range cmds {
		if n := c.Val(); n > 0 {
			counts[sts[i]] = int(n)
		}
	}
	return counts, nil
}

// DeleteInstance implements store.Store.
func (s *Store) DeleteInstance(ctx context.Context, id string, fence uint64) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	res, err := s.write(ctx, deleteScript, s.args(id, strconv.FormatUint(fence, 10))).Result()
	if err != nil {
		return s.fail(ctx, "delete instance", id, err)
	}
	reason, rest, _ := refusal(res)
	switch reason {
	case "ok":
		return nil
	case "notfound":
		return store.NotFound("instance %q", id)
	case "fenced":
		return commitError(id, weft.ErrFenced, rest)
	}
	return fmt.Errorf("redisstore: delete instance %q on %s: unexpected answer %v", id, s.addr, res)
}

// ofInstance runs read with the instance's existence checked in the same
// MULTI, so that a missing instance is ErrNotFound, not an empty answer.
func (s *Store) ofInstance(ctx context.Context, op, id string, read func(p redis.Pipeliner)) ([]redis.Cmder, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var exists *redis.IntCmd
	cmds, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, s.p+"i:"+id)
		read(p)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, op, id, err)
	}
	if exists.Val() == 0 {
		return nil, store.NotFound("instance %q", id)
	}
	return cmds, nil
}

// History implements store.Store. An event's Seq is its place in the
// instance's history list.
func (s *Store) History(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.HistoryEntry, error) {
	limit = weft.ClampLimit(limit)
	var lr *redis.StringSliceCmd
	if _, err := s.ofInstance(ctx, "history of instance", id, func(p redis.Pipeliner) {
		lr = p.LRange(ctx, s.p+"h:"+id, int64(min(afterSeq, 1<<62)), int64(min(afterSeq, 1<<62))+int64(limit)-1)
	}); err != nil {
		return nil, err
	}
	var out []weft.HistoryEntry
	for i, raw := range lr.Val() {
		var e weft.HistoryEntry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return nil, s.corrupt(fmt.Errorf("instance %q: corrupt event: %w", id, err))
		}
		e.Seq = afterSeq + uint64(i) + 1
		out = append(out, e)
	}
	return out, nil
}

// Bookmarks implements store.Store.
func (s *Store) Bookmarks(ctx context.Context, id string) ([]weft.Bookmark, error) {
	var sm *redis.StringSliceCmd
	if _, err := s.ofInstance(ctx, "bookmarks of instance", id, func(p redis.Pipeliner) {
		sm = p.SMembers(ctx, s.p+"b:"+id)
	}); err != nil {
		return nil, err
	}
	out, err := parseAll(s, sm.Val(), parseBookmark)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b weft.Bookmark) int {
		return cmp.Or(cmp.Compare(a.StepPath, b.StepPath), cmp.Compare(a.Event, b.Event), cmp.Compare(a.Key, b.Key))
	})
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// FindBookmarks implements store.Store.
func (s *Store) FindBookmarks(ctx context.Context, event, key string) ([]weft.Bookmark, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	p := tup(nil, event, key)
	ms, err := s.c.ZRangeByLex(ctx, s.p+"bk", &redis.ZRangeBy{Min: "[" + string(p), Max: "(" + prefixEnd(p)}).Result()
	if err != nil {
		return nil, s.fail(ctx, "find bookmarks of event", event, err)
	}
	return parseAll(s, ms, parseBookmark)
}

// Timers implements store.Store.
func (s *Store) Timers(ctx context.Context, id string) ([]weft.Timer, error) {
	var sm *redis.StringSliceCmd
	if _, err := s.ofInstance(ctx, "timers of instance", id, func(p redis.Pipeliner) {
		sm = p.SMembers(ctx, s.p+"t:"+id)
	}); err != nil {
		return nil, err
	}
	// The members sort as (due, instance, id).
	ms := sm.Val()
	slices.Sort(ms)
	return parseAll(s, ms, parseTimer)
}

// upTo is the exclusive ZRANGEBYLEX bound of the members whose hex time is
// not after now.
func upTo(now time.Time) string {
	if !now.Before(maxTime) {
		return "+"
	}
	return "(" + hexTime(now.Add(time.Nanosecond))
}

// DueTimers implements store.Store.
func (s *Store) DueTimers(ctx context.Context, now time.Time, limit int) ([]weft.Timer, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	ms, err := s.c.ZRangeByLex(ctx, s.p+"due", &redis.ZRangeBy{Min: "-", Max: upTo(now), Count: int64(weft.ClampLimit(limit))}).Result()
	if err != nil {
		return nil, s.fail(ctx, "due timers at", now.UTC().Format(time.RFC3339Nano), err)
	}
	return parseAll(s, ms, parseTimer)
}

// RenewLeases implements store.Store: one script, one round trip, for the
// whole batch.
func (s *Store) RenewLeases(ctx context.Context, r store.LeaseRenewal) ([]string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if len(r.IDs) == 0 && len(r.Heartbeats) == 0 {
		return nil, nil
	}
	exp := ""
	if !r.Expiry.IsZero() {
		exp = hexTime(r.Expiry)
	}
	a := s.args(r.Node, r.Boot, hexTime(s.now()), exp, len(r.IDs))
	for _, id := range r.IDs {
		a = a.add(id)
	}
	a = a.add(len(r.Heartbeats))
	for _, h := range r.Heartbeats {
		h.Time = h.Time.UTC()
		raw, err := json.Marshal(h)
		if err != nil {
			return nil, fmt.Errorf("redisstore: heartbeat of instance %q: %w", h.InstanceID, err)
		}
		a = a.add(h.InstanceID, h.Token, raw)
	}
	// The script answers the places in r.IDs (from 1) of the leases it did
	// not renew: usually none. Not waited for (Config.WaitReplicas): a
	// renewal a failover loses makes a lease look older than it is, which
	// at worst hands the instance over early, under a higher fencing token;
	// and renewals run against the lock's deadline.
	lost, err := s.run(writeCtx(ctx), renewScript, a).Int64Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "renew leases of node", r.Node, err)
	}
	var renewed []string
	for i, id := range r.IDs {
		if len(lost) > 0 && lost[0] == int64(i+1) {
			lost = lost[1:]
			continue
		}
		renewed = append(renewed, id)
	}
	return renewed, nil
}

// Heartbeats implements store.Store.
func (s *Store) Heartbeats(ctx context.Context, id string) ([]store.Heartbeat, error) {
	var hv *redis.StringSliceCmd
	if _, err := s.ofInstance(ctx, "heartbeats of instance", id, func(p redis.Pipeliner) {
		hv = p.HVals(ctx, s.p+"e:"+id)
	}); err != nil {
		return nil, err
	}
	var out []store.Heartbeat
	for _, raw := range hv.Val() {
		var h store.Heartbeat
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			return nil, s.corrupt(fmt.Errorf("instance %q: corrupt heartbeat: %w", id, err))
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b store.Heartbeat) int { return cmp.Compare(a.Token, b.Token) })
	return out, nil
}

// ExpiredLeases implements store.Store.
func (s *Store) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	ids, err := s.run(ctx, expiredLeasesScript, s.args(hexTime(now), weft.ClampLimit(limit))).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "expired leases at", now.UTC().Format(time.RFC3339Nano), err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

// ExpiredInstances implements store.Store.
func (s *Store) ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	ms, err := s.c.ZRangeByLex(ctx, s.p+"rx", &redis.ZRangeBy{Min: "-", Max: upTo(now), Count: int64(weft.ClampLimit(limit))}).Result()
	if err != nil {
		return nil, s.fail(ctx, "expired instances at", now.UTC().Format(time.RFC3339Nano), err)
	}
	var out []string
	for _, m := range ms {
		if len(m) < 17 {
			return nil, s.corrupt(fmt.Errorf("corrupt delete-after member %q", m))
		}
		out = append(out, m[16:])
	}
	return out, nil
}

// parseAll parses index members; a member that does not parse is a corrupt
// store.
func parseAll[T any](s *Store, ms []string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, m := range ms {
		v, err := parse(m)
		if err != nil {
			return nil, s.corrupt(err)
		}
		out = append(out, v)
	}
	return out, nil
}

// stimulusArg is commitScript's stimulus argument: the stimulus's id, or,
// in a partition, the name of its marker ("" for none).
func stimulusArg(r role, sid, marker string) string {
	if r == rolePartition && sid != "" {
		return marker
	}
	return sid
}
