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
	"github.com/weftworks/weft/internal/partition"
)

// Moving a whole store into partitions.
//
// OpenPartitioned on a whole store (schema 3, or 1 and 2, which Open
// migrates to 3 first) keeps the whole store's tag as the catalog's, with
// everything a catalog holds in place, and moves each instance into its
// partition: its keys (i:, h:, b:, t:, m:, e:, and its tapes' r:, a:), its lease (its field of
// l) and its entries in the indexes a commit maintains, and its tapes' in
// their plugins' (rp:<plugin>). Open marks the
// schema key movingSchema first, so that a whole Open (of this build or an
// older one) refuses the store from then on, and a partitioned Open
// resumes the move; the last step marks it partitionedSchema.
//
// An instance moves in three steps, none of which names keys of two tags:
//
//  1. moveReadScript, in the whole store, reads a page of a status index
//     and DUMPs each instance's keys (one slot, so one script), with its
//     lease;
//  2. RESTORE writes each key into the instance's partition under a
//     staging name (mv:<kind>:<id>) that expires after moveStaging, and
//     moveAdoptScript, in the partition, renames the staged keys into
//     place and rebuilds the instance's index entries from them, as a
//     commit would have written them;
//  3. moveDropScript, in the whole store, deletes the instance's keys and
//     index entries (deleteScript without the fence check).
//
// Every step can run twice, or on several nodes at once, with the same
// outcome: the adopt step takes an instance only while its partition does
// not hold it, and only while the partition's moving marker is set
// (moveBeginScript sets it, the end of the move deletes it before it marks
// the schema), so that a node stalled in the middle of a move cannot put
// back an instance that has been changed or deleted since the move
// ended; the whole store loses an instance only once its partition holds
// it. A node that fails halfway leaves at most staged keys, which expire.
//
// The move requires every node stopped, as every migration does
// (docs/cluster.md, "Upgrading"): a node of the whole store would go on
// writing where the partitioned store no longer reads. Leases move as they
// are: those of the stopped nodes expire, and the recovery sweep hands
// the instances over, as after any restart; heartbeats move with their
// instances. A whole store has no outbox (only a partitioned store's
// writers fill one), and its inbox sequence (mseq) is copied into every
// partition, so that a message written after the move sorts after those
// that moved.

// movingSchema is the schema key of a whole store whose instances
// OpenPartitioned is moving into partitions: neither "3" nor "3p", so that
// a whole Open refuses it and a partitioned Open finishes the move.
const movingSchema = schemaVersion + ">" + partitionedSchema

// movePage is how many instances one page of the move reads, restores,
// adopts and drops: each step is one script (or one pipeline) per page
// and store, and a page's dumps are held in memory at once.
const movePage = 250

// moveStaging is how long a restored key waits under its staging name for
// the adopt step: far longer than a page takes, and short enough that the
// keys of a node that died between the two steps go away by themselves.
const moveStaging = 10 * time.Minute

// moveKinds are the kinds of an instance's keys, each the first letter of
// its name (P <kind> ":" <id>): the hash, history, bookmarks, timers,
// inbox, heartbeats, and the tapes' summaries and bytes.
const moveKinds = "ihbtmera"

// moveAwait bounds how long a node whose move was ended by another node
// waits for that node to mark the schema.
const moveAwait = 30 * time.Second

// movePrelude holds what the move's scripts share.
const movePrelude = `
local kinds = {"i", "h", "b", "t", "m", "e", "r", "a"}
`

// moveReadScript reads a page of the whole store's index of one status
// and the keys of its instances. ARGV: status, exclusive start ("-" for
// the first page), count. It answers, per member: the member, the
// instance's lease ("" for none), then the DUMP of each of its keys in
// the order of moveKinds (nil for a key that does not exist).
var moveReadScript = script(movePrelude + `
local st, min, n = take(), take(), takeN()
local out = {}
for _, m in ipairs(redis.call("ZRANGEBYLEX", P .. "ix:s:" .. st, min, "+", "LIMIT", 0, n)) do
  local id = string.sub(m, 17)
  out[#out + 1] = m
  out[#out + 1] = redis.call("HGET", P .. "l", id) or ""
  for _, k in ipairs(kinds) do out[#out + 1] = redis.call("DUMP", P .. k .. ":" .. id) end
end
return out
`)

// moveBeginScript readies a partition for the move: it sets the moving
// marker, raises the inbox sequence to the whole store's, and copies the
// catalog's generation unless the partition holds a later one. ARGV: the
// whole store's mseq, its cg.
var moveBeginScript = script(`
local mseq, cg = take(), take()
redis.call("SET", P .. "moving", "1")
if tonumber(redis.call("GET", P .. "mseq") or "0") < tonumber(mseq) then redis.call("SET", P .. "mseq", mseq) end
if cg ~= "" and genOrder(cg) >= genOrder(redis.call("GET", P .. "cg")) then redis.call("SET", P .. "cg", cg) end
return "ok"
`)

// moveAdoptScript is the move's second step in a partition: for each
// instance, unless the partition holds it already, it renames the staged
// keys into place, sets the lease and writes the index entries a commit
// writes (indexed, the waiting inbox, the search attributes, bookmarks,
// timers, the lease index) and those PutTape writes (its tapes' in their
// plugins' indexes), all of them following from the instance's hash, sets
// and tape summaries. ARGV: counted (id, lease ("" for none), the kinds of the
// keys staged, as in moveKinds). It answers one word per instance:
// "moved", "had" (the partition holds it: another run moved it), or
// "gone" (a staged key is missing: it expired), and {"closed"} alone,
// having adopted nothing, when the partition's moving marker is not set
// (the move has ended). It deletes the staged keys it does not adopt.
var moveAdoptScript = script(movePrelude + `
local open = redis.call("EXISTS", P .. "moving") == 1
local res = {}
for i = 1, takeN() do
  local id, le, ks = take(), take(), take()
  local ik = P .. "i:" .. id
  local function staged(k) return P .. "mv:" .. k .. ":" .. id end
  local r = "moved"
  if not open then
    r = "closed"
  elseif redis.call("EXISTS", ik) == 1 then
    r = "had"
  else
    local want = {}
    for k in string.gmatch(ks, ".") do want[#want + 1] = staged(k) end
    if #want == 0 or redis.call("EXISTS", unpack(want)) ~= #want then r = "gone" end
  end
  if r ~= "moved" then
    local all = {}
    for j, k in ipairs(kinds) do all[j] = staged(k) end
    redis.call("DEL", unpack(all))
  else
    local absent = {}
    for _, k in ipairs(kinds) do
      local key = P .. k .. ":" .. id
      if string.find(ks, k, 1, true) then
        redis.call("RENAME", staged(k), key)
        redis.call("PERSIST", key)
      else
        absent[#absent + 1] = key
      end
    end
    if #absent > 0 then redis.call("DEL", unpack(absent)) end
    local f = redis.call("HMGET", ik, "ct", "wf", "st", "term", "pn", "da", "ws", "sa")
    local term = f[4] == "1"
    for _, x in ipairs(indexed(id, f[1], f[2], f[3], term, f[5], f[6])) do
      local k, m = unpair(x)
      redis.call("ZADD", k, 0, m)
    end
    if f[7] and f[7] ~= "" then redis.call("ZADD", P .. "mw", 0, f[7] .. id) end
    if f[8] and f[8] ~= "" then reindexSearch(id, f[1], "", f[8]) end
    for _, m in ipairs(redis.call("SMEMBERS", P .. "b:" .. id)) do redis.call("ZADD", P .. "bk", 0, m) end
    for _, m in ipairs(redis.call("SMEMBERS", P .. "t:" .. id)) do redis.call("ZADD", P .. "due", 0, m) end
    indexTapes(id, true)
    if le ~= "" then
      redis.call("HSET", P .. "l", id, le)
      if not term then redis.call("ZADD", P .. "lz", usec(string.sub(le, 1, 16), math.ceil), id) end
    end
  end
  res[#res + 1] = r
end
if not open then return {"closed"} end
return res
`)

// moveDropScript is the move's last step in the whole store: it deletes
// the keys and index entries of instances their partitions hold, as
// deleteScript does without the fence check (both call removeInstance,
// in the scripts' prelude). ARGV: the status whose index the members are
// from, counted members. A member whose instance is gone (another run
// dropped it) is removed from the status index, which is all that can be
// left of it.
var moveDropScript = script(`
local st = take()
for i = 1, takeN() do
  local m = take()
  local id = string.sub(m, 17)
  local ik = P .. "i:" .. id
  local old = redis.call("HMGET", ik, "ws", "ct", "wf", "st", "term", "pn", "da", "sa")
  if not old[2] then
    redis.call("ZREM", P .. "ix:s:" .. st, m)
  else
    removeInstance(id, unpack(old, 1, 8))
  end
end
return "ok"
`)

// moveWhole moves the instances of a whole store into the partitions when
// the catalog's schema says a move is under way (Open marked it), and
// marks the store partitioned; it does nothing for a store that is
// partitioned already. Pages go status index by status index, each from
// its start: an interrupted move, or one that another node runs at the
// same time, moves each instance once.
func (r *Partitioned) moveWhole(ctx context.Context) error {
	moving, err := r.moveUnderWay(ctx)
	if err != nil || !moving {
		return err
	}
	start := time.Now()
	r.log.Info("redisstore: moving the whole store into partitions", "addr", r.cat.addr, "prefix", r.cfg.Prefix, "partitions", len(r.parts))
	if err := r.beginMove(ctx); err != nil {
		return err
	}
	if moving, err := r.moveUnderWay(ctx); err != nil || !moving {
		// Another node ended the move after this one read the schema:
		// the markers this one set again go with the rest.
		return errors.Join(err, r.clearMoveMarkers(ctx))
	}
	moved := 0
	for _, st := range weft.Statuses() {
		after := "-"
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			last, n, ended, err := r.movePage(ctx, st, after, movePage)
			if err != nil {
				return err
			}
			if ended {
				return r.awaitMoved(ctx)
			}
			moved += n
			if last == "" {
				break
			}
			after = "(" + last
		}
	}
	if err := r.endMove(ctx); err != nil {
		return err
	}
	r.log.Info("redisstore: moved the whole store into partitions", "addr", r.cat.addr, "prefix", r.cfg.Prefix,
		"partitions", len(r.parts), "instances", moved, "took", time.Since(start))
	return nil
}

// moveUnderWay reports whether the catalog's schema key says that a whole
// store is being moved into the partitions.
func (r *Partitioned) moveUnderWay(ctx context.Context) (bool, error) {
	key := r.cat.p + "schema"
	v, err := r.cat.c.Get(ctx, key).Result()
	if err != nil {
		return false, r.moveFail(ctx, "reading "+key, err)
	}
	return v == movingSchema, nil
}

// moveFail wraps an error of the move's step what.
func (r *Partitioned) moveFail(ctx context.Context, what string, err error) error {
	return r.cat.fail(ctx, "move the whole store into partitions: "+what, r.cat.p, err)
}

// beginMove readies every partition (moveBeginScript) with the whole
// store's inbox sequence and catalog generation.
func (r *Partitioned) beginMove(ctx context.Context) error {
	vals, err := r.cat.c.MGet(ctx, r.cat.p+"mseq", r.cat.p+"cg").Result()
	if err != nil {
		return r.moveFail(ctx, "reading mseq and cg", err)
	}
	mseq, _ := vals[0].(string)
	if mseq == "" {
		mseq = "0"
	}
	if _, err := strconv.ParseUint(mseq, 10, 64); err != nil {
		return r.cat.corrupt(fmt.Errorf("%smseq holds %q, not a sequence number", r.cat.p, mseq))
	}
	cg, _ := vals[1].(string)
	return r.each(ctx, func(ctx context.Context, i int, p *Store) error {
		if err := p.write(ctx, moveBeginScript, p.args(mseq, cg)).Err(); err != nil {
			return p.fail(ctx, "ready partition for the move of the whole store", strconv.Itoa(i), err)
		}
		return nil
	})
}

// endMove ends a move that found no instance left in the whole store:
// the partitions' markers first (an adopt step still running somewhere
// then takes nothing), then the schema.
func (r *Partitioned) endMove(ctx context.Context) error {
	if err := r.clearMoveMarkers(ctx); err != nil {
		return err
	}
	if err := r.cat.write(ctx, markSchemaScript, r.cat.args(movingSchema, partitionedSchema)).Err(); err != nil {
		return r.moveFail(ctx, "marking the schema "+partitionedSchema, err)
	}
	return nil
}

// clearMoveMarkers deletes every partition's moving marker.
func (r *Partitioned) clearMoveMarkers(ctx context.Context) error {
	return r.each(ctx, func(ctx context.Context, i int, p *Store) error {
		if err := p.c.Del(ctx, p.p+"moving").Err(); err != nil {
			return p.fail(ctx, "delete the moving marker of partition", strconv.Itoa(i), err)
		}
		return nil
	})
}

// awaitMoved waits, up to moveAwait, for the node that ended the move
// (this node's adopt step found a partition's marker gone) to mark the
// schema.
func (r *Partitioned) awaitMoved(ctx context.Context) error {
	deadline := time.Now().Add(moveAwait)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		moving, err := r.moveUnderWay(ctx)
		if err != nil || !moving {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redisstore: open %s: moving the whole store %s into partitions: another node ended the move, and has not marked the schema %s after %s: open again", r.cat.addr, r.cat.p, partitionedSchema, moveAwait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// moveItem is an instance of a page of the move, as moveReadScript read
// it.
type moveItem struct {
	member, id, lease string
	kinds             string   // the kinds of its keys that exist (moveKinds)
	dumps             []string // their DUMPs, in the order of kinds
}

// movePage moves the instances of a page of the whole store's index of
// status st: at most n members after after (a ZRANGEBYLEX bound, "-" for
// the start). It answers the last member read ("" when the index ended
// within the page, so that there is no next page), how many instances it
// moved, and ended when a partition's marker was gone: another node ended
// the move.
func (r *Partitioned) movePage(ctx context.Context, st weft.Status, after string, n int) (last string, moved int, ended bool, err error) {
	items, err := r.readMovePage(ctx, st, after, n)
	if err != nil {
		return "", 0, false, err
	}
	if len(items) == n {
		last = items[len(items)-1].member
	}
	// The members to drop from the whole store: those whose instances a
	// partition holds now, and those whose instances are gone already.
	var drop []string
	groups := make(map[int][]moveItem)
	for _, it := range items {
		if !strings.HasPrefix(it.kinds, "i") {
			drop = append(drop, it.member)
			continue
		}
		i := partition.Of(it.id, len(r.parts))
		groups[i] = append(groups[i], it)
	}
	if err := r.stageMoves(ctx, groups); err != nil {
		return "", 0, false, err
	}
	outcomes := make([][]string, len(r.parts))
	err = r.each(ctx, func(ctx context.Context, i int, p *Store) error {
		g := groups[i]
		if len(g) == 0 {
			return nil
		}
		a := p.args(len(g))
		for _, it := range g {
			a = a.add(it.id, it.lease, it.kinds)
		}
		res, err := p.write(ctx, moveAdoptScript, a).StringSlice()
		if err != nil {
			return p.fail(ctx, "adopt instances moved into partition "+strconv.Itoa(i)+" from", g[0].id, err)
		}
		outcomes[i] = res
		return nil
	})
	if err != nil {
		return "", 0, false, err
	}
	for i, g := range groups {
		res := outcomes[i]
		if len(res) == 1 && res[0] == "closed" {
			ended = true
			continue
		}
		if len(res) != len(g) {
			return "", 0, false, r.parts[i].corrupt(fmt.Errorf("adopting %d moved instances answered %d outcomes", len(g), len(res)))
		}
		for j, it := range g {
			switch res[j] {
			case "moved":
				moved++
				drop = append(drop, it.member)
			case "had":
				drop = append(drop, it.member)
			default:
				return "", 0, false, fmt.Errorf("redisstore: open %s: moving instance %q into partition %d: the adopt step answered %q: its restored keys expired (%s after the restore) before it ran; open again", r.cat.addr, it.id, i, res[j], moveStaging)
			}
		}
	}
	if len(drop) > 0 {
		a := r.cat.args(string(st), len(drop))
		for _, m := range drop {
			a = a.add(m)
		}
		if err := r.cat.write(ctx, moveDropScript, a).Err(); err != nil {
			return "", 0, false, r.cat.fail(ctx, "drop instances moved into partitions from", drop[0][16:], err)
		}
	}
	if ended {
		// Another node ended the move (a partition's marker is gone): it
		// found every instance of the whole store in a partition.
		return "", moved, true, nil
	}
	return last, moved, false, nil
}

// readMovePage runs moveReadScript and decodes its answer.
func (r *Partitioned) readMovePage(ctx context.Context, st weft.Status, after string, n int) ([]moveItem, error) {
	res, err := r.cat.run(ctx, moveReadScript, r.cat.args(string(st), after, n)).Slice()
	if err != nil {
		return nil, r.cat.fail(ctx, "read instances to move into partitions, status", string(st), err)
	}
	const width = 2 + len(moveKinds)
	if len(res)%width != 0 {
		return nil, r.cat.corrupt(fmt.Errorf("reading the instances of status %s to move: %d values, not a multiple of %d", st, len(res), width))
	}
	items := make([]moveItem, 0, len(res)/width)
	for k := 0; k < len(res); k += width {
		member, _ := res[k].(string)
		lease, _ := res[k+1].(string)
		if len(member) < 17 {
			return nil, r.cat.corrupt(fmt.Errorf("corrupt member %q of %six:s:%s", member, r.cat.p, st))
		}
		it := moveItem{member: member, id: member[16:], lease: lease}
		for j := range len(moveKinds) {
			if d, ok := res[k+2+j].(string); ok {
				it.kinds += moveKinds[j : j+1]
				it.dumps = append(it.dumps, d)
			}
		}
		items = append(items, it)
	}
	return items, nil
}

// stageMoves restores the keys of the instances of groups (by partition)
// under their staging names in their partitions, in one pipeline: each
// RESTORE names one key, so that a cluster client sends each to its
// partition's master.
func (r *Partitioned) stageMoves(ctx context.Context, groups map[int][]moveItem) error {
	type restore struct {
		key, id string
		cmd     *redis.StatusCmd
	}
	var cmds []restore
	_, err := r.cat.c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, g := range groups {
			p := r.parts[i]
			for _, it := range g {
				for j, d := range it.dumps {
					key := p.p + "mv:" + it.kinds[j:j+1] + ":" + it.id
					cmds = append(cmds, restore{key, it.id, pl.RestoreReplace(ctx, key, moveStaging, d)})
				}
			}
		}
		return nil
	})
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		if c.cmd.Err() != nil {
			return r.cat.fail(ctx, "restore "+c.key+" of instance", c.id, c.cmd.Err())
		}
	}
	return r.cat.fail(ctx, "restore the keys of moved instances", "", err)
}
