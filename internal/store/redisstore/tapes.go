package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// Recorded attempts: an instance's tapes are two hashes in its slot (its
// partition's), P r:<id> of the summaries and P a:<id> of the bytes, both
// by tapeField; removeInstance deletes them with the instance, and the
// move into partitions carries them (moveKinds).

// tapeField is a tape's field in both hashes: step path, NUL, exec, NUL,
// attempt. weft.TapeKey.Check refuses a NUL in the path or the exec, so no
// two keys share a field.
func tapeField(k weft.TapeKey) string {
	return k.StepPath + "\x00" + k.Exec + "\x00" + strconv.Itoa(k.Attempt)
}

// putTapeScript is PutTape: the instance must exist, and a tape written
// once stays as it is. ARGV: id, field, summary, data.
var putTapeScript = script(`
local id, f, rec, data = take(), take(), take(), take()
if redis.call("EXISTS", P .. "i:" .. id) == 0 then return {"notfound"} end
if redis.call("HEXISTS", P .. "r:" .. id, f) == 1 then return {"had"} end
redis.call("HSET", P .. "r:" .. id, f, rec)
redis.call("HSET", P .. "a:" .. id, f, data)
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
	res, err := s.write(ctx, putTapeScript, s.args(rec.Key.InstanceID, tapeField(rec.Key), doc, data)).Result()
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
