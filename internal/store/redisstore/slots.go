package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
)

// The concurrency slots of a key (internal/slots) are kept in three
// records — P ck:<key> (the holders, the terms and the line's last
// sequence number), P cl:<key> (the line: waiter ids by sequence number)
// and P cw:<key> (when each waiter joined) — and the key is listed in
// P cx while it has holders or waiters (doc.go's layout). They carry the
// store's hash tag, so WATCH and MULTI/EXEC over them are legal on a
// cluster.
//
// UpdateSlots does not run the algorithm in Lua: it reads a window of the
// key's State (slots.WindowFront) under WATCH, runs the Go operation on
// it, and writes what changed in MULTI/EXEC, which Redis applies only if
// no watched record changed in between; otherwise it reads again. The
// line is never read whole (but under CancelOldest, whose line is short),
// so the cost of a call does not grow with the line (BenchmarkUpdateSlots).

// slotLockCount is how many locks serialize UpdateSlots within a Store:
// keys that hash to one lock wait for each other, which costs little
// (a call holds it for three round trips) and bounds the memory.
const slotLockCount = 64

// maxSlotAttempts bounds the optimistic attempts of one UpdateSlots: each
// conflict means another node's write of the key went through, so the
// key makes progress even when a call gives up.
const maxSlotAttempts = 100

// slotLocks serializes UpdateSlots per key within one Store, so that the
// workers of one node contending for a key queue here rather than abort
// each other's transactions: WATCH conflicts then only happen between
// nodes. The zero value is ready to use. A lock is a channel of capacity
// one, so that waiting for it respects the caller's context.
type slotLocks struct {
	once sync.Once
	ch   [slotLockCount]chan struct{}
}

// lock takes the lock of key, or returns ctx's error while waiting.
func (l *slotLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.once.Do(func() {
		for i := range l.ch {
			l.ch[i] = make(chan struct{}, 1)
		}
	})
	// FNV-1a.
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	ch := l.ch[h%slotLockCount]
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// slotKeys are the names of key's records.
func (s *Store) slotKeys(key string) (rec, line, since string) {
	return s.p + "ck:" + key, s.p + "cl:" + key, s.p + "cw:" + key
}

// readSlotsScript reads the window of a key's State in one round trip
// (UpdateSlots runs it under WATCH, on the transaction's connection).
// ARGV: key, id, the last index of the line's front to read (-1 for the
// whole line). It returns the record's fields h, lim, pol, seq ("" when
// there is no record), the line's length, the number of waiters read,
// then id, sequence, since per waiter, then id's own sequence and since
// ("" when it does not wait).
var readSlotsScript = script(`
local key, id, stop = take(), take(), takeN()
local rk, lk, wk = P .. "ck:" .. key, P .. "cl:" .. key, P .. "cw:" .. key
local r = redis.call("HMGET", rk, "h", "lim", "pol", "seq")
local out = {r[1] or "", r[2] or "", r[3] or "", r[4] or "", redis.call("ZCARD", lk)}
local m = redis.call("ZRANGE", lk, 0, stop, "WITHSCORES")
out[#out + 1] = #m / 2
for i = 1, #m, 2 do
  out[#out + 1] = m[i]
  out[#out + 1] = m[i + 1]
  out[#out + 1] = redis.call("HGET", wk, m[i]) or ""
end
out[#out + 1] = redis.call("ZSCORE", lk, id) or ""
out[#out + 1] = redis.call("HGET", wk, id) or ""
return out
`)

// slotKeysScript reads a page of the keys index and each key's record.
// ARGV: min, max (ZRANGEBYLEX bounds), count. It returns key, h, lim, pol,
// the line's length and its first waiter's since ("" when none) per key.
var slotKeysScript = script(`
local min, max, n = take(), take(), takeN()
local out = {}
for _, k in ipairs(redis.call("ZRANGEBYLEX", P .. "cx", min, max, "LIMIT", 0, n)) do
  local r = redis.call("HMGET", P .. "ck:" .. k, "h", "lim", "pol")
  local lk = P .. "cl:" .. k
  local first = redis.call("ZRANGE", lk, 0, 0)
  local since = ""
  if first[1] then since = redis.call("HGET", P .. "cw:" .. k, first[1]) or "" end
  out[#out + 1] = k
  out[#out + 1] = r[1] or ""
  out[#out + 1] = r[2] or ""
  out[#out + 1] = r[3] or ""
  out[#out + 1] = redis.call("ZCARD", lk)
  out[#out + 1] = since
end
return out
`)

// slotLineScript reads a page of a key's line. ARGV: key, the
// ZRANGEBYSCORE start, count. It returns id, sequence, since per waiter.
var slotLineScript = script(`
local key, min, n = take(), take(), takeN()
local wk = P .. "cw:" .. key
local out = {}
local m = redis.call("ZRANGEBYSCORE", P .. "cl:" .. key, min, "+inf", "WITHSCORES", "LIMIT", 0, n)
for i = 1, #m, 2 do
  out[#out + 1] = m[i]
  out[#out + 1] = m[i + 1]
  out[#out + 1] = redis.call("HGET", wk, m[i]) or ""
end
return out
`)

// slotHolder is a holder as the h field of P ck:<key> keeps it: times in
// Unix nanoseconds, exact (a lease rounded down would end early).
type slotHolder struct {
	ID         string `json:"i"`
	Since      int64  `json:"s"`
	Expiry     int64  `json:"e"`
	Cancelling bool   `json:"c,omitempty"`
}

// unixNanos is t in Unix nanoseconds, clamped to what int64 holds.
func unixNanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return minTime.UnixNano()
	case t.After(maxTime):
		return maxTime.UnixNano()
	}
	return t.UnixNano()
}

// encodeHolders is the h field of hs.
func encodeHolders(hs []slots.Holder) (string, error) {
	out := make([]slotHolder, len(hs))
	for i, h := range hs {
		out[i] = slotHolder{ID: h.ID, Since: unixNanos(h.Since), Expiry: unixNanos(h.Expiry), Cancelling: h.Cancelling}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// decodeHolders reads an h field; "" (no record) is no holder.
func decodeHolders(key, h string) ([]slots.Holder, error) {
	if h == "" {
		return nil, nil
	}
	var in []slotHolder
	if err := json.Unmarshal([]byte(h), &in); err != nil {
		return nil, fmt.Errorf("slot key %q: corrupt holders: %w", key, err)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]slots.Holder, len(in))
	for i, h := range in {
		out[i] = slots.Holder{ID: h.ID, Since: time.Unix(0, h.Since).UTC(), Expiry: time.Unix(0, h.Expiry).UTC(), Cancelling: h.Cancelling}
	}
	return out, nil
}

// sameHolders reports whether a and b are the same holders, at the same
// instants.
func sameHolders(a, b []slots.Holder) bool {
	return slices.EqualFunc(a, b, func(x, y slots.Holder) bool {
		return x.ID == y.ID && x.Since.Equal(y.Since) && x.Expiry.Equal(y.Expiry) && x.Cancelling == y.Cancelling
	})
}

// slotWindow is what UpdateSlots read of a key: the window of its State
// and what it needs to write the changes back.
type slotWindow struct {
	st      slots.State
	exists  bool // the key has a record
	limit   int
	policy  slots.Policy
	seq     int64 // the last sequence number given
	lineLen int64 // the whole line's length
}

// decodeWindow reads readSlotsScript's answer for key and id.
func decodeWindow(key, id string, res []any) (slotWindow, error) {
	w := slotWindow{st: slots.State{Key: key}}
	bad := func(what string) (slotWindow, error) {
		return slotWindow{}, fmt.Errorf("slot key %q: unexpected %s in %v", key, what, res)
	}
	if len(res) < 8 {
		return bad("answer")
	}
	h, _ := res[0].(string)
	lim, _ := res[1].(string)
	pol, _ := res[2].(string)
	seq, _ := res[3].(string)
	w.lineLen, _ = res[4].(int64)
	n, _ := res[5].(int64)
	if int64(len(res)) != 8+3*n {
		return bad("length")
	}
	var err error
	if w.st.Holders, err = decodeHolders(key, h); err != nil {
		return slotWindow{}, err
	}
	w.exists = lim != ""
	if w.exists {
		if w.limit, err = strconv.Atoi(lim); err != nil {
			return bad("limit")
		}
		if w.seq, err = strconv.ParseInt(seq, 10, 64); err != nil {
			return bad("sequence")
		}
		w.policy = slots.Policy(pol)
	}
	waiter := func(i int) (slots.Waiter, error) {
		wid, _ := res[i].(string)
		since, _ := res[i+2].(string)
		t, err := parseHexTime(since)
		if err != nil {
			return slots.Waiter{}, fmt.Errorf("slot key %q: waiter %q: %w", key, wid, err)
		}
		return slots.Waiter{ID: wid, Since: t}, nil
	}
	caller := false
	for i := range int(n) {
		wt, err := waiter(6 + 3*i)
		if err != nil {
			return slotWindow{}, err
		}
		caller = caller || wt.ID == id
		w.st.Waiters = append(w.st.Waiters, wt)
	}
	// The caller's own place when it waits behind the front.
	if sc, _ := res[len(res)-2].(string); sc != "" && !caller {
		since, _ := res[len(res)-1].(string)
		t, err := parseHexTime(since)
		if err != nil {
			return slotWindow{}, fmt.Errorf("slot key %q: waiter %q: %w", key, id, err)
		}
		w.st.Waiters = append(w.st.Waiters, slots.Waiter{ID: id, Since: t})
	}
	return w, nil
}

// checkSlotKey refuses a key that is empty or longer than
// store.MaxSlotKeyLen.
func checkSlotKey(key string) error {
	if key == "" || len(key) > store.MaxSlotKeyLen {
		return store.Invalid("slot key of %d bytes: want 1 to %d", len(key), store.MaxSlotKeyLen)
	}
	return nil
}

// slotFront is the last index of the line's front that UpdateSlots reads
// with p: slots.WindowFront(p) waiters, -1 for the whole line. A limit
// below 1, which op refuses, reads the first waiter.
func slotFront(p slots.Params) int {
	if p.Limit < 1 {
		return 0
	}
	if n := slots.WindowFront(p); n >= 0 {
		return max(n, 1) - 1
	}
	return -1
}

// UpdateSlots implements store.Store. Under a per-key lock of the process
// (slotLocks), it WATCHes the key's records, reads the window in one
// script, runs op in Go and writes the changes in one MULTI/EXEC; when
// another node wrote the key in between, EXEC fails and it begins again,
// up to maxSlotAttempts times (then the error matches
// weft.ErrUnavailable). Three round trips: WATCH, the read, and
// MULTI/EXEC — or UNWATCH when op changed nothing, which writes nothing.
//
// As for a script, a lost connection after EXEC was sent leaves it
// unknown whether the write was applied (the error matches
// weft.ErrUnavailable); the operations are safe to call again: an
// Acquire of a holder or a waiter and a Release of an unknown id change
// nothing but a lease.
func (s *Store) UpdateSlots(ctx context.Context, key, id string, p slots.Params, now time.Time, op store.SlotOp) (slots.Decision, error) {
	if err := s.begin(ctx); err != nil {
		return slots.Decision{}, err
	}
	if err := checkSlotKey(key); err != nil {
		return slots.Decision{}, err
	}
	if err := weft.CheckID("slot holder id", id); err != nil {
		return slots.Decision{}, err
	}
	if op == nil {
		return slots.Decision{}, store.Invalid("slot key %q: the operation must not be nil", key)
	}
	unlock, err := s.slotLocks.lock(ctx, key)
	if err != nil {
		return slots.Decision{}, err
	}
	defer unlock()

	rk, lk, wk := s.slotKeys(key)
	front := slotFront(p)
	var d slots.Decision
	var final error // op's error, or a corrupt record: returned as it is
	attempt := func(tx *redis.Tx) error {
		res, err := readSlotsScript.Run(ctx, tx, []string{s.p + "schema"}, s.args(key, id, front)...).Slice()
		if err != nil {
			return err
		}
		w, err := decodeWindow(key, id, res)
		if err != nil {
			final = s.corrupt(err)
			return final
		}
		// op gets copies: what it returns is compared with what was read.
		in := w.st
		in.Holders, in.Waiters = slices.Clone(in.Holders), slices.Clone(in.Waiters)
		after, dec, err := op(in, id, p, now)
		if err != nil {
			final = err
			return err
		}
		d = dec
		left, joined := slots.LineChanges(w.st.Waiters, after.Waiters)
		lineLen := w.lineLen - int64(len(left)) + int64(len(joined))
		empty := len(after.Holders) == 0 && lineLen == 0
		changed := !sameHolders(w.st.Holders, after.Holders) || len(left) > 0 || len(joined) > 0 ||
			(w.exists && (empty || w.limit != p.Limit || w.policy != p.Policy)) || (!w.exists && !empty)
		if !changed {
			return nil
		}
		var h string
		if !empty {
			if h, err = encodeHolders(after.Holders); err != nil {
				return fmt.Errorf("encoding the holders: %w", err)
			}
		}
		// The write goes on when the caller's context ends: it is applied
		// whole or not at all, and the caller learns which.
		_, err = tx.TxPipelined(writeCtx(ctx), func(pipe redis.Pipeliner) error {
			wctx := writeCtx(ctx)
			if empty {
				pipe.Del(wctx, rk, lk, wk)
				pipe.ZRem(wctx, s.p+"cx", key)
				return nil
			}
			if len(left) > 0 {
				ids := make([]any, len(left))
				for i, l := range left {
					ids[i] = l
				}
				pipe.ZRem(wctx, lk, ids...)
				pipe.HDel(wctx, wk, left...)
			}
			seq := w.seq
			if len(joined) > 0 {
				zs := make([]redis.Z, len(joined))
				since := make([]any, 0, 2*len(joined))
				for i, j := range joined {
					seq++
					zs[i] = redis.Z{Score: float64(seq), Member: j.ID}
					since = append(since, j.ID, hexTime(j.Since))
				}
				pipe.ZAdd(wctx, lk, zs...)
				pipe.HSet(wctx, wk, since...)
			}
			pipe.HSet(wctx, rk, "h", h, "lim", strconv.Itoa(p.Limit), "pol", string(p.Policy), "seq", strconv.FormatInt(seq, 10))
			if !w.exists {
				pipe.ZAdd(wctx, s.p+"cx", redis.Z{Member: key})
			}
			return nil
		})
		if err == nil && s.cfg.WaitReplicas > 0 {
			// On the watched connection, which wrote (wait.go).
			err = s.waitOn(writeCtx(ctx), tx)
		}
		return err
	}

	for n := 1; ; n++ {
		d, final = slots.Decision{}, nil
		err := s.c.Watch(ctx, attempt, rk, lk, wk)
		switch {
		case final != nil:
			return slots.Decision{}, final
		case err == nil:
			return d, nil
		case !errors.Is(err, redis.TxFailedErr):
			return slots.Decision{}, s.fail(ctx, "update slots of key", key, err)
		case n == maxSlotAttempts:
			return slots.Decision{}, fmt.Errorf("redisstore: update slots of key %q on %s: other nodes changed it during each of %d attempts: %w",
				key, s.addr, n, weft.ErrUnavailable)
		}
		// Another node wrote the key: try again, after a short random
		// wait once conflicts repeat, so that contending nodes spread out.
		if n >= 3 {
			t := time.NewTimer(time.Duration(rand.Int64N(int64(min(n, 10)) * int64(time.Millisecond))))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return slots.Decision{}, ctx.Err()
			}
		} else if err := ctx.Err(); err != nil {
			return slots.Decision{}, err
		}
	}
}

// SlotKeys implements store.Store: one script reads a page of P cx from
// after the cursor (the base64 of the last key returned) within the
// prefix, and each key's record, line length and first waiter.
func (s *Store) SlotKeys(ctx context.Context, prefix, cursor string, limit int) ([]store.SlotKey, string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, "", err
	}
	lo, hi := "-", lexAfter(prefix)
	if prefix != "" {
		lo = "[" + prefix
	}
	if cursor != "" {
		after, err := decodeCursor(cursor, 1)
		if err != nil {
			return nil, "", err
		}
		if after >= prefix {
			lo = "(" + after
		}
	}
	limit = weft.ClampLimit(limit)
	res, err := s.run(ctx, slotKeysScript, s.args(lo, hi, limit+1)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", s.fail(ctx, "list slot keys with prefix", prefix, err)
	}
	const width = 6
	var out []store.SlotKey
	var next string
	for i := 0; i+width-1 < len(res); i += width {
		if len(out) == limit {
			next = encodeCursor(out[len(out)-1].Key)
			break
		}
		k, err := decodeSlotKey(res[i : i+width])
		if err != nil {
			return nil, "", s.corrupt(err)
		}
		out = append(out, k)
	}
	return out, next, nil
}

// decodeSlotKey reads one key of slotKeysScript's answer.
func decodeSlotKey(f []any) (store.SlotKey, error) {
	key, _ := f[0].(string)
	h, _ := f[1].(string)
	lim, _ := f[2].(string)
	pol, _ := f[3].(string)
	waiting, _ := f[4].(int64)
	since, _ := f[5].(string)
	holders, err := decodeHolders(key, h)
	if err != nil {
		return store.SlotKey{}, err
	}
	n, err := strconv.Atoi(lim)
	if err != nil {
		return store.SlotKey{}, fmt.Errorf("slot key %q: corrupt limit %q", key, lim)
	}
	k := store.SlotKey{Key: key, Limit: n, Policy: slots.Policy(pol), Holders: holders, Waiting: int(waiting)}
	if since != "" {
		if k.OldestWait, err = parseHexTime(since); err != nil {
			return store.SlotKey{}, fmt.Errorf("slot key %q: first waiter: %w", key, err)
		}
	}
	return k, nil
}

// lexAfter is the ZRANGEBYLEX bound just past every string that starts
// with prefix: the shortest string greater than all of them, exclusive,
// or "+" when there is none (an empty prefix, or one of 0xff bytes).
func lexAfter(prefix string) string {
	n := len(prefix)
	for n > 0 && prefix[n-1] == 0xff {
		n--
	}
	if n == 0 {
		return "+"
	}
	b := []byte(prefix[:n])
	b[n-1]++
	return "(" + string(b)
}

// SlotLine implements store.Store: one script reads a page of P cl:<key>
// by sequence number. The cursor is the base64 of the last sequence
// number returned, so that a page is not shifted by the waiters that
// leave the line between two calls.
func (s *Store) SlotLine(ctx context.Context, key, cursor string, limit int) ([]slots.Waiter, string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, "", err
	}
	if err := checkSlotKey(key); err != nil {
		return nil, "", err
	}
	lo := "-inf"
	if cursor != "" {
		after, err := decodeCursor(cursor, 1)
		if err != nil {
			return nil, "", err
		}
		if _, err := strconv.ParseUint(after, 10, 53); err != nil {
			return nil, "", store.Invalid("bad cursor %q", cursor)
		}
		lo = "(" + after
	}
	limit = weft.ClampLimit(limit)
	res, err := s.run(ctx, slotLineScript, s.args(key, lo, limit+1)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", s.fail(ctx, "list the line of slot key", key, err)
	}
	var out []slots.Waiter
	var next string
	for i := 0; i+2 < len(res); i += 3 {
		if len(out) == limit {
			prev, _ := res[i-2].(string)
			seq, err := strconv.ParseFloat(prev, 64)
			if err != nil {
				return nil, "", s.corrupt(fmt.Errorf("slot key %q: corrupt sequence %q", key, prev))
			}
			next = encodeCursor(strconv.FormatInt(int64(seq), 10))
			break
		}
		id, _ := res[i].(string)
		since, _ := res[i+2].(string)
		t, err := parseHexTime(since)
		if err != nil {
			return nil, "", s.corrupt(fmt.Errorf("slot key %q: waiter %q: %w", key, id, err))
		}
		out = append(out, slots.Waiter{ID: id, Since: t})
	}
	return out, next, nil
}
