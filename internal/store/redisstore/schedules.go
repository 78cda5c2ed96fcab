package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// A schedule is the hash P sc:<id> (doc.go's layout), its events the list
// P sh:<id>, and it is indexed by id in P sn and by wake in P sw. Like
// every key of the store they carry the store's hash tag, so the global
// indexes and a schedule's own keys are in one slot and one script writes
// them all.

// putScheduleScript is CreateSchedule and UpdateSchedule: the checks, then
// the record, its index entries and the events in one step. ARGV: id,
// "1" to create else "0", the revision the update read, doc, the wake's
// time for P sw ("" for none), now, how many events the write appends, how
// many the list keeps, then the counted events it pushes: the last of
// them, no more than the list keeps. It returns {"ok", revision, created
// time} or a refusal: {"exists"}, {"notfound"}, {"conflict", stored
// revision}.
//
// The hash's field es is the Seq of the schedule's last event: the list
// holds the events up to it, so an event's Seq follows from its place.
var putScheduleScript = script(`
local id, create, want, doc, wx, now = take(), take() == "1", take(), take(), take(), take()
local added, keep = takeN(), takeN()
local evs = {}
for i = 1, takeN() do evs[i] = take() end
local sk, hk = P .. "sc:" .. id, P .. "sh:" .. id
local old = redis.call("HMGET", sk, "rev", "ct", "wx", "es")
local rev, ct, es = 1, now, 0
if create then
  if old[1] then return {"exists"} end
else
  if not old[1] then return {"notfound"} end
  if old[1] ~= want then return {"conflict", old[1]} end
  rev, ct, es = tonumber(old[1]) + 1, old[2], tonumber(old[4] or "0")
  local owx = old[3] or ""
  if owx ~= "" and owx ~= wx then redis.call("ZREM", P .. "sw", owx .. id) end
end
local revs = string.format("%d", rev)
redis.call("HSET", sk, "doc", doc, "rev", revs, "ct", ct, "ut", now, "wx", wx, "es", string.format("%d", es + added))
if create then redis.call("ZADD", P .. "sn", 0, id) end
if wx ~= "" then redis.call("ZADD", P .. "sw", 0, wx .. id) end
-- One RPUSH per 500 events rather than one per event (unpack's limit).
for i = 1, #evs, 500 do redis.call("RPUSH", hk, unpack(evs, i, math.min(i + 499, #evs))) end
if #evs > 0 then redis.call("LTRIM", hk, -keep, -1) end
return {"ok", revs, ct}
`)

// deleteScheduleScript is DeleteSchedule. ARGV: id.
var deleteScheduleScript = script(`
local id = take()
local sk = P .. "sc:" .. id
local f = redis.call("HMGET", sk, "rev", "wx")
if not f[1] then return {"notfound"} end
if f[2] and f[2] ~= "" then redis.call("ZREM", P .. "sw", f[2] .. id) end
redis.call("ZREM", P .. "sn", id)
redis.call("DEL", sk, P .. "sh:" .. id)
return {"ok"}
`)

// listSchedulesScript reads a page of schedules by id. ARGV: min, count.
// It returns id, then the values of scheduleFields, per schedule.
var listSchedulesScript = script(`
local min, n = take(), takeN()
local out = {}
for _, id in ipairs(redis.call("ZRANGEBYLEX", P .. "sn", min, "+", "LIMIT", 0, n)) do
  local f = redis.call("HMGET", P .. "sc:" .. id, "doc", "rev", "ct", "ut")
  out[#out + 1] = id
  for i = 1, 4 do out[#out + 1] = f[i] end
end
return out
`)

// scheduleEventsScript is ScheduleEvents: the existence of the schedule,
// its last Seq and its events read at one moment. ARGV: id, the Seq to
// read after, count. It returns {"notfound"} or {"ok", the Seq of the
// first event returned, the events...}.
var scheduleEventsScript = script(`
local id, after, n = take(), takeN(), takeN()
local f = redis.call("HMGET", P .. "sc:" .. id, "rev", "es")
if not f[1] then return {"notfound"} end
local hk = P .. "sh:" .. id
local first = tonumber(f[2] or "0") - redis.call("LLEN", hk) + 1
local start = math.max(after - first + 1, 0)
local out = {"ok", string.format("%d", first + start)}
for _, e in ipairs(redis.call("LRANGE", hk, string.format("%d", start), string.format("%d", start + n - 1))) do
  out[#out + 1] = e
end
return out
`)

// scheduleFields are the fields of a schedule hash that make a Schedule,
// in the order GetSchedule and listSchedulesScript read them.
var scheduleFields = []string{"doc", "rev", "ct", "ut"}

// scheduleDoc is the JSON kept in a schedule hash's doc field: what the
// caller writes. The store's own fields (revision, times, the wake's index
// member, the last event's Seq) are fields of the hash, which the scripts
// read and write.
type scheduleDoc struct {
	Document json.RawMessage `json:"document"`
	State    json.RawMessage `json:"state,omitempty"`
	Note     string          `json:"note,omitempty"`
	Wake     time.Time       `json:"wake,omitzero"`
}

// decodeSchedule builds schedule id from the values of scheduleFields, as
// HMGET or a script returns them.
func decodeSchedule(id string, vals []any) (*weft.Schedule, error) {
	if len(vals) != len(scheduleFields) {
		return nil, fmt.Errorf("schedule %q: %d fields, want %d", id, len(vals), len(scheduleFields))
	}
	doc, ok := vals[0].(string)
	if !ok {
		return nil, fmt.Errorf("schedule %q: record missing", id)
	}
	var d scheduleDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return nil, fmt.Errorf("schedule %q: corrupt record: %w", id, err)
	}
	rs, _ := vals[1].(string)
	rev, err := strconv.ParseUint(rs, 10, 64)
	if err != nil || rev == 0 {
		return nil, fmt.Errorf("schedule %q: corrupt revision %q", id, rs)
	}
	ct, _ := vals[2].(string)
	created, err := parseHexTime(ct)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: created: %w", id, err)
	}
	ut, _ := vals[3].(string)
	updated, err := parseHexTime(ut)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: updated: %w", id, err)
	}
	return &weft.Schedule{ID: id, Document: d.Document, State: d.State, Note: d.Note, Wake: d.Wake,
		Revision: rev, CreatedAt: created, UpdatedAt: updated}, nil
}

// CreateSchedule implements store.Store: one script checks that the id is
// free and writes the record, its index entries and the events.
func (s *Store) CreateSchedule(ctx context.Context, sc *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error) {
	return s.putSchedule(ctx, sc, events, true)
}

// UpdateSchedule implements store.Store: one script compares the revision
// and writes the record, moves its wake in the index and appends the
// events, trimming the oldest.
func (s *Store) UpdateSchedule(ctx context.Context, sc *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error) {
	return s.putSchedule(ctx, sc, events, false)
}

// putSchedule is CreateSchedule (create) and UpdateSchedule.
func (s *Store) putSchedule(ctx context.Context, sc *weft.Schedule, events []weft.ScheduleEvent, create bool) (*weft.Schedule, error) {
	op, flag := "update schedule", "0"
	if create {
		op, flag = "create schedule", "1"
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if sc == nil {
		return nil, store.Invalid("schedule must not be nil")
	}
	id := sc.ID
	if err := weft.CheckID("schedule id", id); err != nil {
		return nil, err
	}
	if len(sc.Document) == 0 {
		return nil, store.Invalid("schedule %q: document must not be empty", id)
	}
	d := scheduleDoc{Document: sc.Document, State: sc.State, Note: sc.Note, Wake: sc.Wake.UTC()}
	// Marshal checks that the document and the state are JSON, and
	// compacts them; the schedule returned is decoded from what is stored.
	doc, err := json.Marshal(d)
	if err != nil {
		return nil, store.Invalid("schedule %q: %v", id, err)
	}
	wx := ""
	if !d.Wake.IsZero() {
		wx = hexTime(d.Wake)
	}
	now := s.now()
	// The events the list would trim at once are not sent; they still
	// take their Seq.
	kept := events[max(0, len(events)-weft.MaxScheduleEvents):]
	a := s.args(id, flag, strconv.FormatUint(sc.Revision, 10), doc, wx, hexTime(now),
		len(events), weft.MaxScheduleEvents, len(kept))
	for i, e := range events {
		// Seq follows from the event's place in the list; Time is the
		// store's.
		e.Seq, e.Time = 0, now
		raw, err := json.Marshal(e)
		if err != nil {
			return nil, store.Invalid("schedule %q: event %d (%s): %v", id, i, e.Type, err)
		}
		if i >= len(events)-len(kept) {
			a = a.add(raw)
		}
	}

	res, err := s.write(ctx, putScheduleScript, a).Result()
	if err != nil {
		return nil, s.fail(ctx, op, id, err)
	}
	reason, rest, _ := refusal(res)
	switch reason {
	case "ok":
	case "exists":
		return nil, fmt.Errorf("store: schedule %q: %w", id, weft.ErrExists)
	case "notfound":
		return nil, store.NotFound("schedule %q", id)
	case "conflict":
		if len(rest) == 1 {
			return nil, fmt.Errorf("store: schedule %q: revision %d is stored, not %d: %w", id, u64(rest[0]), sc.Revision, weft.ErrConflict)
		}
	}
	if reason != "ok" || len(rest) != 2 {
		return nil, fmt.Errorf("redisstore: %s %q on %s: unexpected answer %v", op, id, s.addr, res)
	}
	out, err := decodeSchedule(id, []any{string(doc), rest[0], rest[1], hexTime(now)})
	if err != nil {
		return nil, s.corrupt(err)
	}
	return out, nil
}

// GetSchedule implements store.Store: one HMGET.
func (s *Store) GetSchedule(ctx context.Context, id string) (*weft.Schedule, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := weft.CheckID("schedule id", id); err != nil {
		return nil, err
	}
	vals, err := s.c.HMGet(ctx, s.p+"sc:"+id, scheduleFields...).Result()
	if err != nil {
		return nil, s.fail(ctx, "get schedule", id, err)
	}
	if len(vals) == 0 || vals[0] == nil {
		return nil, store.NotFound("schedule %q", id)
	}
	sc, err := decodeSchedule(id, vals)
	if err != nil {
		return nil, s.corrupt(err)
	}
	return sc, nil
}

// ListSchedules implements store.Store.
func (s *Store) ListSchedules(ctx context.Context, cursor string, limit int) ([]weft.Schedule, string, error) {
	return listByName(ctx, s, listSchedulesScript, "schedules", cursor, limit, 1+len(scheduleFields),
		func(id string, f []any) (weft.Schedule, error) {
			sc, err := decodeSchedule(id, f)
			if err != nil {
				return weft.Schedule{}, err
			}
			return *sc, nil
		},
		func(sc weft.Schedule) string { return sc.ID })
}

// DeleteSchedule implements store.Store: one script removes the record,
// its index entries and its events.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := weft.CheckID("schedule id", id); err != nil {
		return err
	}
	res, err := s.write(ctx, deleteScheduleScript, s.args(id)).Result()
	if err != nil {
		return s.fail(ctx, "delete schedule", id, err)
	}
	switch reason, _, _ := refusal(res); reason {
	case "ok":
		return nil
	case "notfound":
		return store.NotFound("schedule %q", id)
	}
	return fmt.Errorf("redisstore: delete schedule %q on %s: unexpected answer %v", id, s.addr, res)
}

// DueSchedules implements store.Store. The members of P sw are the wake's
// hex time, then the id, so byte order is (wake, id). Wakes after 2262 are
// kept as 2262's (hexTime clamps them): they are due only then, and
// among themselves by id.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]weft.Schedule, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	ms, err := s.c.ZRangeByLex(ctx, s.p+"sw", &redis.ZRangeBy{Min: "-", Max: upTo(now), Count: int64(weft.ClampLimit(limit))}).Result()
	if err != nil {
		return nil, s.fail(ctx, "due schedules at", now.UTC().Format(time.RFC3339Nano), err)
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		if len(m) < 17 {
			return nil, s.corrupt(fmt.Errorf("corrupt schedule wake member %q", m))
		}
		ids[i] = m[16:]
	}
	// The records, in one round trip. A schedule deleted since the index
	// was read is left out.
	cmds := make([]*redis.SliceCmd, len(ids))
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, s.p+"sc:"+id, scheduleFields...)
		}
		return nil
	}); err != nil {
		return nil, s.fail(ctx, "due schedules at", now.UTC().Format(time.RFC3339Nano), err)
	}
	out := make([]weft.Schedule, 0, len(ids))
	for i, c := range cmds {
		vals := c.Val()
		if len(vals) == 0 || vals[0] == nil {
			continue
		}
		sc, err := decodeSchedule(ids[i], vals)
		if err != nil {
			return nil, s.corrupt(err)
		}
		out = append(out, *sc)
	}
	return out, nil
}

// ScheduleEvents implements store.Store: one script reads the schedule's
// last Seq and the page of its events at one moment.
func (s *Store) ScheduleEvents(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.ScheduleEvent, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := weft.CheckID("schedule id", id); err != nil {
		return nil, err
	}
	// Lua numbers are exact to 2^53, beyond any Seq a schedule reaches.
	res, err := s.run(ctx, scheduleEventsScript, s.args(id, strconv.FormatUint(min(afterSeq, 1<<53), 10), weft.ClampLimit(limit))).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "events of schedule", id, err)
	}
	reason, rest, _ := refusal(res)
	switch {
	case reason == "notfound":
		return nil, store.NotFound("schedule %q", id)
	case reason != "ok" || len(rest) == 0:
		return nil, fmt.Errorf("redisstore: events of schedule %q on %s: unexpected answer %v", id, s.addr, res)
	}
	first := u64(rest[0])
	var out []weft.ScheduleEvent
	for i, v := range rest[1:] {
		raw, _ := v.(string)
		var e weft.ScheduleEvent
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return nil, s.corrupt(fmt.Errorf("schedule %q: corrupt event: %w", id, err))
		}
		e.Seq = first + uint64(i)
		out = append(out, e)
	}
	return out, nil
}
