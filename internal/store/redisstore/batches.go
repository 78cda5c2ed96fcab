package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// A batch is the hash P batch:<id> (doc.go's layout), its items the hash
// P batch-items:<id> (instance → "<seq>|<outcome>|<reason>|<unix nanos>"),
// listed in Seq order by the sorted set P batch-seq:<id> and by outcome
// in P batch-o:<outcome>:<id> (scores the Seqs). Batches are indexed by
// creation in P batches:all and by wake in P batches:due. Each kind of key
// has a prefix of its own, ended by the id, so that no batch's key is
// another's whatever the ids (a batch "x:items" has no key in common with
// a batch "x"). Every key has the store's hash tag: one script writes a
// batch, its items and the inboxes of its instances, so applying an item
// and writing its messages is one step, as on embedded.

// batchLua is the part of the batch scripts they share, after the prelude.
const batchLua = `
local function bkey(id) return P .. "batch:" .. id end
local function ikey(id) return P .. "batch-items:" .. id end
local function skey(id) return P .. "batch-seq:" .. id end
local function okey(id, o) return P .. "batch-o:" .. o .. ":" .. id end
-- casBatch checks that batch id is stored at revision want; it returns a
-- refusal, or nil and the stored revision and wake index member.
local function casBatch(id, want)
  local f = redis.call("HMGET", bkey(id), "rev", "wx")
  if not f[1] then return {"notfound"}, nil end
  if f[1] ~= want then return {"conflict", f[1]}, nil end
  return nil, f
end
-- writeBatch writes a batch's state and wake over f (casBatch's), its
-- next revision and update time, and moves it in batches:due.
local function writeBatch(id, f, state, wake, wx, now)
  local owx = f[2] or ""
  if owx ~= "" and owx ~= wx then redis.call("ZREM", P .. "batches:due", owx .. id) end
  if wx ~= "" then redis.call("ZADD", P .. "batches:due", 0, wx .. id) end
  redis.call("HSET", bkey(id), "state", state, "wake", wake, "wx", wx,
    "rev", string.format("%d", tonumber(f[1]) + 1), "ut", now)
end
-- zaddAll adds the (score, member) pairs listed flat in t to sorted set
-- k, 500 pairs a call.
local function zaddAll(k, t)
  for i = 1, #t, 1000 do redis.call("ZADD", k, unpack(t, i, math.min(i + 999, #t))) end
end
-- appendItems adds the ids that are not items of batch id yet, pending
-- since nanos, after its last, and counts them; it returns how many.
local function appendItems(id, ids, nanos)
  local bk, ik = bkey(id), ikey(id)
  local n = tonumber(redis.call("HGET", bk, "n") or "0")
  local zs = {}
  for _, inst in ipairs(ids) do
    local seq = string.format("%d", n + 1)
    if redis.call("HSETNX", ik, inst, seq .. "|pending||" .. nanos) == 1 then
      n = n + 1
      zs[#zs + 1] = seq
      zs[#zs + 1] = inst
    end
  end
  zaddAll(skey(id), zs)
  zaddAll(okey(id, "pending"), zs)
  local added = #zs / 2
  redis.call("HSET", bk, "n", string.format("%d", n))
  if added > 0 then redis.call("HINCRBY", bk, "c:pending", added) end
  return added
end
`

func batchScript(body string) *redis.Script { return script(batchLua + body) }

// createBatchScript is CreateBatch. ARGV: id, doc, state, wake, wake's
// index member time ("" for none), actor, now, now in Unix nanoseconds,
// counted ids. It returns {"exists"} or {"ok", the batch's fields}.
var createBatchScript = batchScript(`
local id, doc, state, wake, wx, actor, now, nanos = take(), take(), take(), take(), take(), take(), take(), take()
local ids = {}
for i = 1, takeN() do ids[i] = take() end
local bk = bkey(id)
if redis.call("EXISTS", bk) == 1 then return {"exists"} end
redis.call("HSET", bk, "doc", doc, "state", state, "wake", wake, "wx", wx, "actor", actor,
  "rev", "1", "ct", now, "ut", now, "n", "0")
redis.call("ZADD", P .. "batches:all", 0, now .. id)
if wx ~= "" then redis.call("ZADD", P .. "batches:due", 0, wx .. id) end
appendItems(id, ids, nanos)
return {"ok", redis.call("HGETALL", bk)}
`)

// updateBatchScript is UpdateBatch. ARGV: id, revision read, state, wake,
// wake's member time, now. It returns a refusal ({"notfound"},
// {"conflict", stored revision}) or {"ok", the batch's fields}.
var updateBatchScript = batchScript(`
local id, want, state, wake, wx, now = take(), take(), take(), take(), take(), take()
local refused, f = casBatch(id, want)
if refused then return refused end
writeBatch(id, f, state, wake, wx, now)
return {"ok", redis.call("HGETALL", bkey(id))}
`)

// addBatchItemsScript is AddBatchItems. ARGV: as updateBatchScript's,
// then now in Unix nanoseconds and counted ids. It returns a refusal or
// {"ok", the batch's fields, how many items it added}.
var addBatchItemsScript = batchScript(`
local id, want, state, wake, wx, now, nanos = take(), take(), take(), take(), take(), take(), take()
local ids = {}
for i = 1, takeN() do ids[i] = take() end
local refused, f = casBatch(id, want)
if refused then return refused end
writeBatch(id, f, state, wake, wx, now)
local added = appendItems(id, ids, nanos)
return {"ok", redis.call("HGETALL", bkey(id)), added}
`)

// applyBatchItemsScript is ApplyBatchItems. ARGV: the store's role
// (role.String), then as updateBatchScript's, then now in Unix
// nanoseconds, the reason of an item whose instance is gone, the outcomes
// an item can move to (counted), and counted changes: instance, outcome,
// reason, counted messages (id, record). It returns a refusal or {"ok",
// the batch's fields, the outbox entries written (in order)}.
//
// A change applies only to a pending item: it takes the item out of
// pending and writes the messages with writeMessage, Deliver's own, in
// the one script; so a change applied twice, by two steppers or after a
// crash, writes nothing the second time. In a catalog (role "catalog"),
// which holds no instance, the messages go into the outbox (outboxWrite)
// for the router to relay, and an item is applied without looking for its
// instance: the router has turned the changes of instances that do not
// exist into skipped ones before the call.
var applyBatchItemsScript = batchScript(`
outboxMode = take() == "catalog"
local id, want, state, wake, wx, now, nanos, gone = take(), take(), take(), take(), take(), take(), take(), take()
local outcomes = {}
for i = 1, takeN() do outcomes[i] = take() end
local changes = {}
for i = 1, takeN() do
  local c = {take(), take(), take(), {}}
  for j = 1, takeN() do c[4][j] = {take(), take()} end
  changes[i] = c
end
local refused, f = casBatch(id, want)
if refused then return refused end
writeBatch(id, f, state, wake, wx, now)
local bk, ik, pk = bkey(id), ikey(id), okey(id, "pending")
local moved, left, eids = {}, 0, {}
for _, c in ipairs(changes) do
  local inst, outcome, reason = c[1], c[2], c[3]
  local v = redis.call("HGET", ik, inst)
  local i = v and string.find(v, "|", 1, true)
  if i and string.sub(v, i + 1, i + 8) == "pending|" then
    local seq = string.sub(v, 1, i - 1)
    if outboxMode then
      for _, m in ipairs(c[4]) do eids[#eids + 1] = outboxWrite(inst, m[1], m[2], now) end
    elseif redis.call("EXISTS", P .. "i:" .. inst) == 1 then
      for _, m in ipairs(c[4]) do writeMessage(inst, m[1], m[2], now) end
    else
      outcome, reason = "skipped", gone
    end
    redis.call("HSET", ik, inst, seq .. "|" .. outcome .. "|" .. reason .. "|" .. nanos)
    redis.call("ZREM", pk, inst)
    redis.call("ZADD", okey(id, outcome), seq, inst)
    moved[outcome] = (moved[outcome] or 0) + 1
    left = left + 1
  end
end
if left > 0 then redis.call("HINCRBY", bk, "c:pending", -left) end
for _, o in ipairs(outcomes) do
  if moved[o] then redis.call("HINCRBY", bk, "c:" .. o, moved[o]) end
end
return {"ok", redis.call("HGETALL", bk), eids}
`)

// deleteBatchScript is DeleteBatch. ARGV: id, counted outcomes. Its items
// go with UNLINK, which frees a large hash or sorted set off Redis's main
// thread.
var deleteBatchScript = batchScript(`
local id = take()
local keys = {bkey(id), ikey(id), skey(id)}
for i = 1, takeN() do keys[#keys + 1] = okey(id, take()) end
local f = redis.call("HMGET", keys[1], "rev", "wx", "ct")
if not f[1] then return {"notfound"} end
if f[2] and f[2] ~= "" then redis.call("ZREM", P .. "batches:due", f[2] .. id) end
redis.call("ZREM", P .. "batches:all", f[3] .. id)
redis.call("UNLINK", unpack(keys))
return {"ok"}
`)

// batchItemsScript is BatchItems: the batch's existence and a page of its
// items read at one moment. ARGV: id, the Seq to read after, count,
// outcome ("" for all). It returns {"notfound"} or {"ok", then instance
// and item value per item}.
var batchItemsScript = batchScript(`
local id, after, n, o = take(), take(), takeN(), take()
if redis.call("EXISTS", bkey(id)) == 0 then return {"notfound"} end
local zk = skey(id)
if o ~= "" then zk = okey(id, o) end
local insts = redis.call("ZRANGEBYSCORE", zk, "(" .. after, "+inf", "LIMIT", 0, n)
local out = {"ok"}
if #insts == 0 then return out end
local vals = redis.call("HMGET", ikey(id), unpack(insts))
for i, inst in ipairs(insts) do
  out[#out + 1] = inst
  out[#out + 1] = vals[i] or ""
end
return out
`)

// listBatchesScript reads a page of batches, newest first. ARGV: the
// ZREVRANGEBYLEX max ("+" or "(" and the member of the last batch
// listed), count. It returns member and fields per batch.
var listBatchesScript = batchScript(`
local max, n = take(), takeN()
local out = {}
for _, m in ipairs(redis.call("ZREVRANGEBYLEX", P .. "batches:all", max, "-", "LIMIT", 0, n)) do
  out[#out + 1] = m
  out[#out + 1] = redis.call("HGETALL", bkey(string.sub(m, 17)))
end
return out
`)

// batchWake is a batch's wake as its hash keeps it: exact (RFC 3339), and
// as the time of its member of batches:due (hexTime, clamped to 2262); ""
// for none.
func batchWake(w time.Time) (wake, wx string) {
	if w.IsZero() {
		return "", ""
	}
	w = w.UTC()
	return w.Format(time.RFC3339Nano), hexTime(w)
}

// fieldMap reads a hash as HGETALL answers it to a script: a flat list of
// field, value.
func fieldMap(v any) (map[string]string, bool) {
	l, ok := v.([]any)
	if !ok || len(l)%2 != 0 {
		return nil, false
	}
	m := make(map[string]string, len(l)/2)
	for i := 0; i < len(l); i += 2 {
		k, ok1 := l[i].(string)
		v, ok2 := l[i+1].(string)
		if !ok1 || !ok2 {
			return nil, false
		}
		m[k] = v
	}
	return m, true
}

// decodeBatch builds batch id from its hash's fields.
func decodeBatch(id string, f map[string]string) (*weft.Batch, error) {
	doc, ok := f["doc"]
	if !ok {
		return nil, fmt.Errorf("batch %q: record missing", id)
	}
	b := &weft.Batch{ID: id, Document: []byte(doc), Actor: f["actor"], Counts: weft.BatchCounts{}}
	if st := f["state"]; st != "" {
		b.State = []byte(st)
	}
	var err error
	if b.Revision, err = strconv.ParseUint(f["rev"], 10, 64); err != nil || b.Revision == 0 {
		return nil, fmt.Errorf("batch %q: corrupt revision %q", id, f["rev"])
	}
	if w := f["wake"]; w != "" {
		if b.Wake, err = time.Parse(time.RFC3339Nano, w); err != nil {
			return nil, fmt.Errorf("batch %q: corrupt wake %q", id, w)
		}
	}
	if b.CreatedAt, err = parseHexTime(f["ct"]); err != nil {
		return nil, fmt.Errorf("batch %q: created: %w", id, err)
	}
	if b.UpdatedAt, err = parseHexTime(f["ut"]); err != nil {
		return nil, fmt.Errorf("batch %q: updated: %w", id, err)
	}
	for k, v := range f {
		o, ok := strings.CutPrefix(k, "c:")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("batch %q: corrupt count %s=%q", id, k, v)
		}
		if n != 0 {
			b.Counts[weft.BatchOutcome(o)] = n
		}
	}
	return b, nil
}

// decodeBatchItem reads the value of instance's item of batch id:
// "<seq>|<outcome>|<reason>|<unix nanos>" (a reason may hold '|').
func decodeBatchItem(id, instance, v string) (weft.BatchItem, error) {
	it := weft.BatchItem{Batch: id, InstanceID: instance}
	seq, rest, ok1 := strings.Cut(v, "|")
	outcome, rest, ok2 := strings.Cut(rest, "|")
	i := strings.LastIndexByte(rest, '|')
	if !ok1 || !ok2 || i < 0 {
		return it, fmt.Errorf("batch %q: corrupt item of instance %q: %q", id, instance, v)
	}
	var err1, err2 error
	it.Seq, err1 = strconv.ParseUint(seq, 10, 64)
	nanos, err2 := strconv.ParseInt(rest[i+1:], 10, 64)
	if err1 != nil || err2 != nil {
		return it, fmt.Errorf("batch %q: corrupt item of instance %q: %q", id, instance, v)
	}
	it.Outcome, it.Reason, it.Time = weft.BatchOutcome(outcome), rest[:i], time.Unix(0, nanos).UTC()
	return it, nil
}

// batchAnswer reads a batch write's answer: the batch, or the error of a
// refusal (exists, notfound, conflict), naming op.
func (s *Store) batchAnswer(op string, b *weft.Batch, res any) (*weft.Batch, []any, error) {
	reason, rest, _ := refusal(res)
	switch reason {
	case "ok":
		if len(rest) > 0 {
			if f, ok := fieldMap(rest[0]); ok {
				out, err := decodeBatch(b.ID, f)
				if err != nil {
					return nil, nil, s.corrupt(err)
				}
				return out, rest[1:], nil
			}
		}
	case "exists":
		return nil, nil, fmt.Errorf("store: batch %q: %w", b.ID, weft.ErrExists)
	case "notfound":
		return nil, nil, store.NotFound("batch %q", b.ID)
	case "conflict":
		if len(rest) == 1 {
			return nil, nil, fmt.Errorf("store: batch %q: revision %d is stored, not %d: %w", b.ID, u64(rest[0]), b.Revision, weft.ErrConflict)
		}
	}
	return nil, nil, fmt.Errorf("redisstore: %s %q on %s: unexpected answer %v", op, b.ID, s.addr, res)
}

// CreateBatch implements store.Store: one script checks that the id is
// free and writes the record, its index entries and the items.
func (s *Store) CreateBatch(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := store.ValidateBatch(b, true); err != nil {
		return nil, err
	}
	ids, err := store.BatchIDs(b.ID, ids)
	if err != nil {
		return nil, err
	}
	now := s.now()
	wake, wx := batchWake(b.Wake)
	a := s.args(b.ID, []byte(b.Document), []byte(b.State), wake, wx, b.Actor, hexTime(now), strconv.FormatInt(unixNanos(now), 10), len(ids))
	for _, id := range ids {
		a = a.add(id)
	}
	res, err := s.write(ctx, createBatchScript, a).Result()
	if err != nil {
		return nil, s.fail(ctx, "create batch", b.ID, err)
	}
	out, _, err := s.batchAnswer("create batch", b, res)
	return out, err
}

// GetBatch implements store.Store: one HGETALL.
func (s *Store) GetBatch(ctx context.Context, id string) (*weft.Batch, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := weft.CheckID("batch id", id); err != nil {
		return nil, err
	}
	f, err := s.c.HGetAll(ctx, s.p+"batch:"+id).Result()
	if err != nil {
		return nil, s.fail(ctx, "get batch", id, err)
	}
	if len(f) == 0 {
		return nil, store.NotFound("batch %q", id)
	}
	b, err := decodeBatch(id, f)
	if err != nil {
		return nil, s.corrupt(err)
	}
	return b, nil
}

// ListBatches implements store.Store: batches:all read backwards (its
// members are the creation time, then the id) from the cursor, the member
// of the last batch listed.
func (s *Store) ListBatches(ctx context.Context, cursor string, limit int) ([]weft.Batch, string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, "", err
	}
	max := "+"
	if cursor != "" {
		after, err := decodeCursor(cursor, 17)
		if err != nil {
			return nil, "", err
		}
		max = "(" + after
	}
	limit = weft.ClampLimit(limit)
	res, err := s.run(ctx, listBatchesScript, s.args(max, limit+1)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", s.fail(ctx, "list batches after", cursor, err)
	}
	var out []weft.Batch
	var next, last string
	for i := 0; i+1 < len(res); i += 2 {
		if len(out) == limit {
			next = encodeCursor(last)
			break
		}
		m, _ := res[i].(string)
		f, ok := fieldMap(res[i+1])
		if len(m) < 17 || !ok {
			return nil, "", s.corrupt(fmt.Errorf("corrupt batch index member %q", m))
		}
		if len(f) == 0 {
			return nil, "", s.corrupt(fmt.Errorf("batch %q: an index entry without its record", m[16:]))
		}
		b, err := decodeBatch(m[16:], f)
		if err != nil {
			return nil, "", s.corrupt(err)
		}
		out = append(out, *b)
		last = m
	}
	return out, next, nil
}

// UpdateBatch implements store.Store: one script compares the revision,
// writes the state and the wake and moves the wake in its index.
func (s *Store) UpdateBatch(ctx context.Context, b *weft.Batch) (*weft.Batch, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := store.ValidateBatch(b, false); err != nil {
		return nil, err
	}
	wake, wx := batchWake(b.Wake)
	a := s.args(b.ID, strconv.FormatUint(b.Revision, 10), []byte(b.State), wake, wx, hexTime(s.now()))
	res, err := s.write(ctx, updateBatchScript, a).Result()
	if err != nil {
		return nil, s.fail(ctx, "update batch", b.ID, err)
	}
	out, _, err := s.batchAnswer("update batch", b, res)
	return out, err
}

// DeleteBatch implements store.Store: one script removes the record, its
// index entries and its items.
func (s *Store) DeleteBatch(ctx context.Context, id string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := weft.CheckID("batch id", id); err != nil {
		return err
	}
	a := s.args(id, len(weft.BatchOutcomes()))
	for _, o := range weft.BatchOutcomes() {
		a = a.add(string(o))
	}
	res, err := s.write(ctx, deleteBatchScript, a).Result()
	if err != nil {
		return s.fail(ctx, "delete batch", id, err)
	}
	switch reason, _, _ := refusal(res); reason {
	case "ok":
		return nil
	case "notfound":
		return store.NotFound("batch %q", id)
	}
	return fmt.Errorf("redisstore: delete batch %q on %s: unexpected answer %v", id, s.addr, res)
}

// DueBatches implements store.Store. The members of batches:due are the
// wake's hex time, then the id, so byte order is (wake, id); a wake after
// 2262 is due then (hexTime clamps it), and returned exact.
func (s *Store) DueBatches(ctx context.Context, now time.Time, limit int) ([]weft.Batch, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	at := now.UTC().Format(time.RFC3339Nano)
	ms, err := s.c.ZRangeByLex(ctx, s.p+"batches:due", &redis.ZRangeBy{Min: "-", Max: upTo(now), Count: int64(weft.ClampLimit(limit))}).Result()
	if err != nil {
		return nil, s.fail(ctx, "due batches at", at, err)
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		if len(m) < 17 {
			return nil, s.corrupt(fmt.Errorf("corrupt batch wake member %q", m))
		}
		ids[i] = m[16:]
	}
	// The records, in one round trip. A batch deleted since the index was
	// read is left out.
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.p+"batch:"+id)
		}
		return nil
	}); err != nil {
		return nil, s.fail(ctx, "due batches at", at, err)
	}
	out := make([]weft.Batch, 0, len(ids))
	for i, c := range cmds {
		f := c.Val()
		if len(f) == 0 {
			continue
		}
		b, err := decodeBatch(ids[i], f)
		if err != nil {
			return nil, s.corrupt(err)
		}
		out = append(out, *b)
	}
	return out, nil
}

// AddBatchItems implements store.Store: one script compares the revision,
// writes the state and the wake, and appends the ids that are not items
// yet (HSETNX on the items hash).
func (s *Store) AddBatchItems(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, int, error) {
	if err := s.begin(ctx); err != nil {
		return nil, 0, err
	}
	if err := store.ValidateBatch(b, false); err != nil {
		return nil, 0, err
	}
	ids, err := store.BatchIDs(b.ID, ids)
	if err != nil {
		return nil, 0, err
	}
	now := s.now()
	wake, wx := batchWake(b.Wake)
	a := s.args(b.ID, strconv.FormatUint(b.Revision, 10), []byte(b.State), wake, wx, hexTime(now), strconv.FormatInt(unixNanos(now), 10), len(ids))
	for _, id := range ids {
		a = a.add(id)
	}
	res, err := s.write(ctx, addBatchItemsScript, a).Result()
	if err != nil {
		return nil, 0, s.fail(ctx, "add items to batch", b.ID, err)
	}
	out, rest, err := s.batchAnswer("add items to batch", b, res)
	if err != nil {
		return nil, 0, err
	}
	if len(rest) != 1 {
		return nil, 0, fmt.Errorf("redisstore: add items to batch %q on %s: unexpected answer %v", b.ID, s.addr, res)
	}
	return out, int(u64(rest[0])), nil
}

// BatchItems implements store.Store: one script reads the batch's
// existence and the page, from its Seq index or an outcome's.
func (s *Store) BatchItems(ctx context.Context, batch string, f weft.BatchItemFilter) ([]weft.BatchItem, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := weft.CheckID("batch id", batch); err != nil {
		return nil, err
	}
	limit, err := store.BatchItemLimit(batch, f)
	if err != nil {
		return nil, err
	}
	// Scores are exact to 2^53, beyond any Seq a batch reaches.
	res, err := s.run(ctx, batchItemsScript, s.args(batch, strconv.FormatUint(min(f.AfterSeq, 1<<53), 10), limit, string(f.Outcome))).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "items of batch", batch, err)
	}
	reason, rest, _ := refusal(res)
	switch {
	case reason == "notfound":
		return nil, store.NotFound("batch %q", batch)
	case reason != "ok" || len(rest)%2 != 0:
		return nil, fmt.Errorf("redisstore: items of batch %q on %s: unexpected answer %v", batch, s.addr, res)
	}
	out := make([]weft.BatchItem, 0, len(rest)/2)
	for i := 0; i < len(rest); i += 2 {
		inst, _ := rest[i].(string)
		v, _ := rest[i+1].(string)
		it, err := decodeBatchItem(batch, inst, v)
		if err != nil {
			return nil, s.corrupt(err)
		}
		out = append(out, it)
	}
	return out, nil
}

// ApplyBatchItems implements store.Store: one script (applyBatchItemsScript)
// compares the revision, writes the state and the wake, and applies each
// pending item with its messages.
func (s *Store) ApplyBatchItems(ctx context.Context, b *weft.Batch, changes []weft.BatchChange) (*weft.Batch, error) {
	out, _, err := s.applyBatchItems(ctx, b, changes)
	return out, err
}

// applyBatchItems is ApplyBatchItems, answering also the ids of the
// outbox entries it wrote, in order: in a catalog (roleCatalog) the
// messages go into the outbox, and the router relays these entries; in
// the other roles there are none.
func (s *Store) applyBatchItems(ctx context.Context, b *weft.Batch, changes []weft.BatchChange) (*weft.Batch, []string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, nil, err
	}
	if err := store.ValidateBatch(b, false); err != nil {
		return nil, nil, err
	}
	changes, err := store.BatchChanges(b.ID, changes)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	wake, wx := batchWake(b.Wake)
	a := s.args(s.cfg.role.String(), b.ID, strconv.FormatUint(b.Revision, 10), []byte(b.State), wake, wx, hexTime(now), strconv.FormatInt(unixNanos(now), 10), weft.BatchNotFound)
	a = a.add(len(weft.BatchOutcomes()))
	for _, o := range weft.BatchOutcomes() {
		a = a.add(string(o))
	}
	a = a.add(len(changes))
	for _, c := range changes {
		a = a.add(c.InstanceID, string(c.Outcome), c.Reason)
		// As Deliver writes them: the record without its Seq, created now.
		ms, err := messageArgs(nil, c.Messages, now)
		if err != nil {
			return nil, nil, fmt.Errorf("redisstore: batch %q: message to %q: %w", b.ID, c.InstanceID, err)
		}
		a = a.add(ms[0])
		for i := 1; i+2 < len(ms); i += 3 {
			a = a.add(ms[i+1], ms[i+2]) // id, record (the target is the change's)
		}
	}
	res, err := s.write(ctx, applyBatchItemsScript, a).Result()
	if err != nil {
		return nil, nil, s.fail(ctx, "apply items of batch", b.ID, err)
	}
	out, rest, err := s.batchAnswer("apply items of batch", b, res)
	if err != nil {
		return nil, nil, err
	}
	eids, ok := outboxIDs(rest)
	if !ok {
		return nil, nil, fmt.Errorf("redisstore: apply items of batch %q on %s: unexpected answer %v", b.ID, s.addr, res)
	}
	return out, eids, nil
}

// outboxIDs reads the one list of strings that ends a script's answer
// (rest, after what the caller read): the ids of the outbox entries the
// script wrote. ok is false for anything else.
func outboxIDs(rest []any) (_ []string, ok bool) {
	if len(rest) != 1 {
		return nil, false
	}
	l, ok := rest[0].([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(l))
	for _, v := range l {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}
