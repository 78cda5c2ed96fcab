package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// Recorded attempts: an instance's tapes are two hashes in its slot (its
// partition's), P r:<id> of the summaries and P a:<id> of the bytes, both
// by tapeField; removeInstance deletes them with the instance, and the
// move into partitions carries them (moveKinds).
//
// FindTapes reads a sorted set per plugin, P rp:<plugin>, of the tapes of
// every instance of the store (of the partition): member the instance id's
// length, ":", the id and the tapeField (tapeMember in the scripts'
// prelude), score the recording time in Unix milliseconds (tapeScore).
// The entries follow from the summaries, which hold the plugin and the
// time: PutTape adds one with the tape, and removeInstance (a delete, the
// move's drop) and the move's adopt step read the instance's summaries
// (HGETALL, cjson) to remove or add its entries. So an instance carries no
// list of its entries, and the move needs no key kind more: its r: hash
// says it all. A summary is a few hundred bytes and an instance has few
// tapes, and an instance without any costs the delete one HGETALL of a
// missing key.

// tapeField is a tape's field in both hashes: step path, NUL, exec, NUL,
// attempt. weft.TapeKey.Check refuses a NUL in the path or the exec, so no
// two keys share a field.
func tapeField(k weft.TapeKey) string {
	return k.StepPath + "\x00" + k.Exec + "\x00" + strconv.Itoa(k.Attempt)
}

// putTapeScript is PutTape: the instance must exist, and a tape written
// once stays as it is; a tape written enters its plugin's index. ARGV: id,
// field, summary, data, plugin ("" for none: no entry), recording time
// (as the summary's JSON has it).
var putTapeScript = script(`
local id, f, rec, data, plugin, at = take(), take(), take(), take(), take(), take()
if redis.call("EXISTS", P .. "i:" .. id) == 0 then return {"notfound"} end
if redis.call("HEXISTS", P .. "r:" .. id, f) == 1 then return {"had"} end
local score = tapeScore(at)
redis.call("HSET", P .. "r:" .. id, f, rec)
redis.call("HSET", P .. "a:" .. id, f, data)
if plugin ~= "" and score then redis.call("ZADD", P .. "rp:" .. plugin, score, tapeMember(id, f)) end
return {"ok"}
`)

// PutTape implements store.Store.
func (s *Store) PutTape(ctx context.Context, rec weft.TapeRecord, data []byte) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := store.ValidateTape(rec, data); err != nil {
		return err
	}
	rec.Size = len(data)
	rec.RecordedAt = s.cfg.Now().UTC()
	doc, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("redisstore: tape %s: %w", rec.Key, err)
	}
	at, err := rec.RecordedAt.MarshalText()
	if err != nil {
		return fmt.Errorf("redisstore: tape %s: %w", rec.Key, err)
	}
	res, err := s.write(ctx, putTapeScript, s.args(rec.Key.InstanceID, tapeField(rec.Key), doc, data, rec.Plugin, at)).Result()
	if err != nil {
		return s.fail(ctx, "put tape", rec.Key.String(), err)
	}
	switch reason, _, _ := refusal(res); reason {
	case "ok", "had":
		return nil
	case "notfound":
		return store.NotFound("instance %q of tape %s", rec.Key.InstanceID, rec.Key)
	}
	return fmt.Errorf("redisstore: put tape %s on %s: unexpected answer %v", rec.Key, s.addr, res)
}

// GetTape implements store.Store.
func (s *Store) GetTape(ctx context.Context, k weft.TapeKey) (*weft.TapeRecord, []byte, error) {
	if err := s.begin(ctx); err != nil {
		return nil, nil, err
	}
	f := tapeField(k)
	var doc, data *redis.StringCmd
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		doc = p.HGet(ctx, s.p+"r:"+k.InstanceID, f)
		data = p.HGet(ctx, s.p+"a:"+k.InstanceID, f)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, s.fail(ctx, "get tape", k.String(), err)
	}
	if errors.Is(doc.Err(), redis.Nil) {
		return nil, nil, store.NotFound("tape %s", k)
	}
	if errors.Is(data.Err(), redis.Nil) {
		return nil, nil, s.corrupt(fmt.Errorf("tape %s: summary without data", k))
	}
	var rec weft.TapeRecord
	if err := json.Unmarshal([]byte(doc.Val()), &rec); err != nil {
		return nil, nil, s.corrupt(fmt.Errorf("tape %s: corrupt summary: %w", k, err))
	}
	return &rec, []byte(data.Val()), nil
}

// ListTapes implements store.Store.
func (s *Store) ListTapes(ctx context.Context, id string) ([]weft.TapeRecord, error) {
	var hv *redis.StringSliceCmd
	if _, err := s.ofInstance(ctx, "tapes of instance", id, func(p redis.Pipeliner) {
		hv = p.HVals(ctx, s.p+"r:"+id)
	}); err != nil {
		return nil, err
	}
	var out []weft.TapeRecord
	for _, raw := range hv.Val() {
		var rec weft.TapeRecord
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return nil, s.corrupt(fmt.Errorf("instance %q: corrupt tape summary: %w", id, err))
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b weft.TapeRecord) int { return a.Key.Compare(b.Key) })
	return out, nil
}

// tapesPage is how many entries of a plugin's index FindTapes reads at a
// time, and the summaries it reads in one pipeline.
const tapesPage = 200

// FindTapes implements store.Store: pages of P rp:<plugin> from the
// newest entry back to q.Since (ZREVRANGEBYSCORE), each page's summaries
// read in one pipeline and filtered by workflow, until q.Limit of them
// and the others recorded in the millisecond of the last. An entry whose
// summary is gone (its instance deleted by a build before the index) is
// skipped.
func (s *Store) FindTapes(ctx context.Context, q weft.TapeQuery) ([]weft.TapeRecord, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := q.Check(); err != nil {
		return nil, err
	}
	index := s.p + "rp:" + q.Plugin
	lo := "-inf"
	if !q.Since.IsZero() {
		// One millisecond of slack below: the summaries' times decide.
		lo = strconv.FormatInt(floorMilli(q.Since)-1, 10)
	}
	var (
		out  []weft.TapeRecord
		seen = make(map[string]bool)
		hi   = "+inf"
		skip int64 // entries at score hi read already
	)
	for {
		page, err := s.c.ZRevRangeByScoreWithScores(ctx, index, &redis.ZRangeBy{Max: hi, Min: lo, Offset: skip, Count: tapesPage}).Result()
		if err != nil {
			return nil, s.fail(ctx, "find tapes of plugin", q.Plugin, err)
		}
		// The next page: from the score of this one's last entry, past
		// those of its entries at that score.
		if n := len(page); n > 0 {
			last := page[n-1].Score
			at := 0
			for i := n - 1; i >= 0 && page[i].Score == last; i-- {
				at++
			}
			if next := strconv.FormatFloat(last, 'f', -1, 64); next == hi {
				skip += int64(at)
			} else {
				hi, skip = next, int64(at)
			}
		}
		docs := make([]*redis.StringCmd, len(page))
		if len(page) > 0 {
			_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, z := range page {
					id, f, ok := splitTapeMember(z.Member.(string))
					if !ok {
						continue
					}
					docs[i] = p.HGet(ctx, s.p+"r:"+id, f)
				}
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, s.fail(ctx, "read tapes of plugin", q.Plugin, err)
			}
		}
		for i, z := range page {
			m := z.Member.(string)
			if docs[i] == nil {
				return nil, s.corrupt(fmt.Errorf("corrupt member %q of %s", m, index))
			}
			switch err := docs[i].Err(); {
			case errors.Is(err, redis.Nil):
				continue
			case err != nil:
				return nil, s.fail(ctx, "read tapes of plugin", q.Plugin, err)
			case seen[m]:
				continue
			}
			seen[m] = true
			var rec weft.TapeRecord
			if err := json.Unmarshal([]byte(docs[i].Val()), &rec); err != nil {
				return nil, s.corrupt(fmt.Errorf("tape %q of plugin %q: corrupt summary: %w", m, q.Plugin, err))
			}
			// A summary of another instance of the same id, or one
			// recorded before Since in the millisecond of slack.
			if rec.Plugin != q.Plugin || rec.RecordedAt.Before(q.Since) || (q.Workflow != "" && rec.Workflow != q.Workflow) {
				continue
			}
			out = append(out, rec)
		}
		// Done at the index's end, or with Limit tapes and a page past
		// the millisecond of the Limit-th (the entries of one millisecond
		// may sort in any order by time).
		if len(page) < tapesPage {
			break
		}
		if len(out) >= q.Limit {
			slices.SortFunc(out, compareFound)
			if page[len(page)-1].Score < float64(floorMilli(out[q.Limit-1].RecordedAt)) {
				break
			}
		}
	}
	slices.SortFunc(out, compareFound)
	return out[:min(len(out), q.Limit)], nil
}

// splitTapeMember splits a member of a plugin's index into the instance
// id and the tape's field.
func splitTapeMember(m string) (id, field string, ok bool) {
	i := strings.IndexByte(m, ':')
	if i < 0 {
		return "", "", false
	}
	n, err := strconv.Atoi(m[:i])
	if err != nil || n < 0 || i+1+n > len(m) {
		return "", "", false
	}
	return m[i+1 : i+1+n], m[i+1+n:], true
}

// floorMilli is t in Unix milliseconds rounded down, as tapeScore rounds.
func floorMilli(t time.Time) int64 {
	return t.Unix()*1000 + int64(t.Nanosecond()/1e6)
}

// compareFound is the order of FindTapes: the newest first, then by key.
func compareFound(a, b weft.TapeRecord) int {
	if c := b.RecordedAt.Compare(a.RecordedAt); c != 0 {
		return c
	}
	return a.Key.Compare(b.Key)
}

// FindTapes implements store.Store: every partition's newest, merged.
func (r *Partitioned) FindTapes(ctx context.Context, q weft.TapeQuery) ([]weft.TapeRecord, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	found := make([][]weft.TapeRecord, len(r.parts))
	err := r.each(ctx, func(ctx context.Context, i int, p *Store) error {
		var err error
		found[i], err = p.FindTapes(ctx, q)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := slices.Concat(found...)
	slices.SortFunc(out, compareFound)
	return out[:min(len(out), q.Limit)], nil
}

// PutTape implements store.Store: in the instance's partition.
func (r *Partitioned) PutTape(ctx context.Context, rec weft.TapeRecord, data []byte) error {
	return r.part(rec.Key.InstanceID).PutTape(ctx, rec, data)
}

// GetTape implements store.Store: from the instance's partition.
func (r *Partitioned) GetTape(ctx context.Context, k weft.TapeKey) (*weft.TapeRecord, []byte, error) {
	return r.part(k.InstanceID).GetTape(ctx, k)
}

// ListTapes implements store.Store: from the instance's partition.
func (r *Partitioned) ListTapes(ctx context.Context, id string) ([]weft.TapeRecord, error) {
	return r.part(id).ListTapes(ctx, id)
}
