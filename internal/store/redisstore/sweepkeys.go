package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
)

// keyedID is an instance id with its place in a sweep's order: the index
// member it was read from (a time of 16 hex digits, then the id), so that
// the router merges the partitions' answers in the order one store gives.
type keyedID struct{ key, id string }

// membersAfterTime reads up to limit members of the lex index key whose
// time (their first 16 hex digits) is before max (a ZRANGEBYLEX bound),
// as keyedIDs.
func (s *Store) membersAfterTime(ctx context.Context, index, max, op, at string, limit int) ([]keyedID, error) {
	ms, err := s.c.ZRangeByLex(ctx, s.p+index, &redis.ZRangeBy{Min: "-", Max: max, Count: int64(weft.ClampLimit(limit))}).Result()
	if err != nil {
		return nil, s.fail(ctx, op, at, err)
	}
	out := make([]keyedID, 0, len(ms))
	for _, m := range ms {
		if len(m) < 17 {
			return nil, s.corrupt(fmt.Errorf("corrupt member %q of index %s", m, index))
		}
		out = append(out, keyedID{m, m[16:]})
	}
	return out, nil
}

// waitingInboxesKeyed is WaitingInboxes with each id's member of mw.
func (s *Store) waitingInboxesKeyed(ctx context.Context, before time.Time, limit int) ([]keyedID, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if !before.After(time.Unix(0, 0)) {
		return nil, nil
	}
	return s.membersAfterTime(ctx, "mw", "("+hexTime(before), "waiting inboxes before", before.UTC().Format(time.RFC3339Nano), limit)
}

// expiredInstancesKeyed is ExpiredInstances with each id's member of rx.
func (s *Store) expiredInstancesKeyed(ctx context.Context, now time.Time, limit int) ([]keyedID, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	return s.membersAfterTime(ctx, "rx", upTo(now), "expired instances at", now.UTC().Format(time.RFC3339Nano), limit)
}

// expiredLeasesKeyed is ExpiredLeases with each id's lease expiry (16 hex
// digits) and id as its key, read from the leases' hash after the script.
func (s *Store) expiredLeasesKeyed(ctx context.Context, now time.Time, limit int) ([]keyedID, error) {
	ids, err := s.ExpiredLeases(ctx, now, limit)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	vs, err := s.c.HMGet(ctx, s.p+"l", ids...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "lease expiries at", now.UTC().Format(time.RFC3339Nano), err)
	}
	out := make([]keyedID, 0, len(ids))
	for i, id := range ids {
		v, _ := vs[i].(string)
		if len(v) < 16 {
			v = "" // renewed away or ended since: first, as it was due
		}
		out = append(out, keyedID{v[:min(16, len(v))] + id, id})
	}
	return out, nil
}

// mergeByKey merges lists in key order and returns up to limit ids.
func mergeByKey(lists [][]keyedID, limit int) []string {
	all := slices.Concat(lists...)
	slices.SortFunc(all, func(a, b keyedID) int { return cmp.Compare(a.key, b.key) })
	limit = weft.ClampLimit(limit)
	if len(all) > limit {
		all = all[:limit]
	}
	if len(all) == 0 {
		return nil
	}
	out := make([]string, len(all))
	for i, k := range all {
		out[i] = k.id
	}
	return out
}
