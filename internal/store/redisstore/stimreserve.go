package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/store"
)

// Stimulus reservations: the catalog's side of a commit that consumes a
// queued stimulus (Commit.DeliveredStimulus) for an instance of a
// partition. commitScript consumes the stimulus in the same script as the
// commit when both are in one store; in a partitioned store they are in
// two, and no script spans two tags, so the router runs three steps:
//
//  1. reserveStimulus in the catalog takes the stimulus out of the queue
//     (sq) and out of the expiry index (sx), and records who reserved it
//     until when (the field rv of P s:<id>, and P sv by deadline). Its
//     state stays "queued": it is neither consumed nor dead yet.
//  2. The commit in the partition, which leaves a marker of the stimulus
//     there (P sdl:<id> = outcome) in its own script.
//  3. confirmStimulus in the catalog records the delivery, as commitScript
//     does; or, when the partition refused the commit, releaseStimulus
//     puts the stimulus back where it was in the queue and the expiry
//     index.
//
// A node that dies between the steps leaves a reservation behind: the
// stimuli sweep reads those past their deadline (expiredReservations) and
// confirms each whose marker is in the partition, or releases it.
//
// While reserved, a stimulus is in no queue index: PendingStimuli and
// QueuedStimuli (which read sq and sx) do not list it, since another
// consumer could not take it, and ExpireStimuli (which walks sx) does not
// kill it, since a commit may be consuming it. A release puts it back into
// both, with its expiry unchanged, so that the next ExpireStimuli kills it
// when it expired meanwhile. GetStimulus shows it queued, as it is until
// the confirmation. The forget sweep walks sf, which a stimulus enters
// only once settled, so a reservation never meets it.

// errNotReserved is confirmStimulus's refusal: the stimulus is neither
// reserved for the instance nor delivered to it (released by the sweep,
// reserved by another, or forgotten).
var errNotReserved = errors.New("stimulus not reserved for the instance")

// reservation is a stimulus reserved for a commit of Instance, which the
// sweep settles once Deadline has passed (expiredReservations).
type reservation struct {
	Stimulus, Instance string
	Deadline           time.Time
}

// reserveStimulusScript reserves a queued stimulus. ARGV: stimulus id,
// instance, now, deadline. It returns {"notqueued"} unless the stimulus is
// queued, unexpired at now and not reserved; else {"ok"}.
var reserveStimulusScript = script(`
local sid, inst, now, deadline = take(), take(), take(), take()
local sk = P .. "s:" .. sid
local f = redis.call("HMGET", sk, "state", "ex", "qm", "rv")
if f[1] ~= "queued" or not f[3] or not tlt(now, f[2]) or (f[4] and f[4] ~= "") then return {"notqueued"} end
redis.call("ZREM", P .. "sq", f[3])
redis.call("ZREM", P .. "sx", f[2] .. sid)
redis.call("HSET", sk, "rv", deadline .. inst)
redis.call("ZADD", P .. "sv", 0, deadline .. sid)
return {"ok"}
`)

// confirmStimulusScript records a reserved stimulus as delivered, with
// the fields commitScript writes. ARGV: stimulus id, instance, now,
// outcome, forget time. It returns {"ok"} when it confirmed, or when the
// stimulus is delivered to the instance already; else {"notreserved",
// state, rv}.
var confirmStimulusScript = script(`
local sid, inst, now, outcome, forget = take(), take(), take(), take(), take()
local sk = P .. "s:" .. sid
local f = redis.call("HMGET", sk, "state", "ex", "rv", "to")
local rv = f[3]
if rv and #rv > 16 and string.sub(rv, 17) == inst then
  if tlt(forget, f[2]) then forget = f[2] end
  redis.call("HSET", sk, "state", "delivered", "set", now, "to", inst, "out", outcome)
  redis.call("HDEL", sk, "qm", "rv")
  redis.call("ZREM", P .. "sv", string.sub(rv, 1, 16) .. sid)
  redis.call("ZADD", P .. "sf", 0, forget .. sid)
  return {"ok"}
end
if f[1] == "delivered" and f[4] == inst then return {"ok"} end
return {"notreserved", f[1] or "", rv or ""}
`)

// releaseStimulusScript puts a stimulus reserved for the instance back
// into the queue and the expiry index. ARGV: stimulus id, instance. It
// returns {"ok"} whether it released or the stimulus was not reserved for
// the instance.
var releaseStimulusScript = script(`
local sid, inst = take(), take()
local sk = P .. "s:" .. sid
local f = redis.call("HMGET", sk, "ex", "qm", "rv")
local rv = f[3]
if not rv or #rv <= 16 or string.sub(rv, 17) ~= inst then return {"ok"} end
redis.call("ZADD", P .. "sq", 0, f[2])
redis.call("ZADD", P .. "sx", 0, f[1] .. sid)
redis.call("HDEL", sk, "rv")
redis.call("ZREM", P .. "sv", string.sub(rv, 1, 16) .. sid)
return {"ok"}
`)

// expiredReservationsScript reads the reservations with a deadline not
// after now. ARGV: the ZRANGEBYLEX bound of now (upTo), limit. It returns
// member, rv per reservation (rv false when the stimulus has none).
var expiredReservationsScript = script(`
local bound, n = take(), takeN()
local out = {}
for _, m in ipairs(redis.call("ZRANGEBYLEX", P .. "sv", "-", bound, "LIMIT", 0, n)) do
  out[#out + 1] = m
  out[#out + 1] = redis.call("HGET", P .. "s:" .. string.sub(m, 17), "rv")
end
return out
`)

// reserveStimulus reserves queued stimulus sid for a commit of instance
// until deadline. Refused, it returns a *store.CommitError matching
// store.ErrNotQueued, as Commit's for a stimulus that is not queued, which
// the router can return as its Commit's: the stimulus is unknown, not
// queued, expired at now, or reserved already (for this instance too: a
// second attempt of the same instance must not share the first's
// reservation, whose release would requeue what the first consumed).
func (s *Store) reserveStimulus(ctx context.Context, sid, instance string, now, deadline time.Time) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	res, err := s.write(ctx, reserveStimulusScript, s.args(sid, instance, hexTime(now), hexTime(deadline))).Result()
	if err != nil {
		return s.fail(ctx, "reserve stimulus", sid, err)
	}
	switch reason, _, _ := refusal(res); reason {
	case "ok":
		return nil
	case "notqueued":
		return &store.CommitError{InstanceID: instance, Err: store.ErrNotQueued, Stimulus: sid}
	}
	return fmt.Errorf("redisstore: reserve stimulus %q for instance %q on %s: unexpected answer %v", sid, instance, s.addr, res)
}

// confirmStimulus records stimulus sid, reserved for instance, as
// delivered to it with outcome at now, as a commit that consumes it does.
// Confirming a stimulus delivered to instance already returns nil, so that
// the router and the sweep may both confirm. Otherwise the error matches
// errNotReserved.
func (s *Store) confirmStimulus(ctx context.Context, sid, instance string, outcome []byte, now time.Time) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	now = now.UTC()
	a := s.args(sid, instance, hexTime(now), []byte(compact(outcome)), hexTime(now.Add(s.cfg.DeliveredRetention)))
	res, err := s.write(ctx, confirmStimulusScript, a).Result()
	if err != nil {
		return s.fail(ctx, "confirm stimulus", sid, err)
	}
	reason, rest, _ := refusal(res)
	switch {
	case reason == "ok":
		return nil
	case reason == "notreserved" && len(rest) == 2:
		state, _ := rest[0].(string)
		rv, _ := rest[1].(string)
		by := ""
		if len(rv) > 16 {
			by = rv[16:]
		}
		return fmt.Errorf("redisstore: confirm stimulus %q for instance %q on %s: state %q, reserved by %q: %w", sid, instance, s.addr, state, by, errNotReserved)
	}
	return fmt.Errorf("redisstore: confirm stimulus %q for instance %q on %s: unexpected answer %v", sid, instance, s.addr, res)
}

// releaseStimulus puts stimulus sid, reserved for instance, back into the
// queue at its place and into the expiry index. A stimulus not reserved
// for instance (released or confirmed already, reserved by another) is
// left as it is, and the answer is nil: a release is repeated safely.
func (s *Store) releaseStimulus(ctx context.Context, sid, instance string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	res, err := s.write(ctx, releaseStimulusScript, s.args(sid, instance)).Result()
	if err != nil {
		return s.fail(ctx, "release stimulus", sid, err)
	}
	if reason, _, _ := refusal(res); reason != "ok" {
		return fmt.Errorf("redisstore: release stimulus %q for instance %q on %s: unexpected answer %v", sid, instance, s.addr, res)
	}
	return nil
}

// expiredReservations returns up to limit reservations whose deadline is
// not after now, earliest deadline first: those the router neither
// confirmed nor released in time (its node died, or lost the catalog), for
// the stimuli sweep to settle.
func (s *Store) expiredReservations(ctx context.Context, now time.Time, limit int) ([]reservation, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	now = now.UTC()
	if limit <= 0 {
		return nil, nil
	}
	res, err := s.run(ctx, expiredReservationsScript, s.args(upTo(now), limit)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "reservations expired at", now.Format(time.RFC3339Nano), err)
	}
	out := make([]reservation, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		m, _ := res[i].(string)
		rv, _ := res[i+1].(string)
		if len(m) < 17 {
			return nil, s.corrupt(fmt.Errorf("corrupt reservation member %q", m))
		}
		// Confirm and release remove the member with the field: one
		// without the other is a broken store, not a reservation.
		if len(rv) < 17 || rv[:16] != m[:16] {
			return nil, s.corrupt(fmt.Errorf("stimulus %q: reservation index entry %q without its reservation (rv %q)", m[16:], m, rv))
		}
		deadline, err := parseHexTime(m[:16])
		if err != nil {
			return nil, s.corrupt(fmt.Errorf("stimulus %q: reservation deadline: %w", m[16:], err))
		}
		out = append(out, reservation{Stimulus: m[16:], Instance: rv[16:], Deadline: deadline})
	}
	return out, nil
}

// releasedMarker is the marker settleMarker leaves for a reservation it
// settles as released: no outcome a commit stores (compact JSON, or
// nothing) looks like it.
const releasedMarker = "\x00released"

// settleMarkerScript decides, in the instance's partition, how a
// reservation past its deadline ends: with the commit's marker there, as
// delivered ({"marked", outcome}); without one, as released, leaving the
// released marker so that a commit arriving later is refused
// (commitScript) rather than consuming a stimulus the sweep gave back.
// ARGV: stimulus id, the marker's lifetime in ms.
var settleMarkerScript = script(`
local k = P .. "sdl:" .. take()
local v = redis.call("GET", k)
if v then return {"marked", v} end
redis.call("SET", k, "` + releasedMarker + `", "PX", take())
return {"released"}
`)

// settleMarker settles, in a partition, the reservation of a stimulus
// that a commit of this partition may have consumed, by the name of its
// marker (reservationMarker): it returns the commit's outcome and true
// when the commit happened, or false, after which that reservation's
// commit cannot run (the router then releases the reservation; a later
// reservation of the stimulus has a marker of its own). Deciding in the partition, in one script,
// is what keeps a commit that comes late from consuming a stimulus the
// sweep released: the nodes' clocks decide nothing.
func (s *Store) settleMarker(ctx context.Context, sid string) (outcome []byte, delivered bool, err error) {
	if err := s.begin(ctx); err != nil {
		return nil, false, err
	}
	ms := max(s.cfg.DeliveredRetention.Milliseconds(), 1)
	res, err := s.write(ctx, settleMarkerScript, s.args(sid, ms)).Slice()
	if err != nil {
		return nil, false, s.fail(ctx, "settle the reservation of stimulus", sid, err)
	}
	if len(res) == 2 && res[0] == "marked" {
		v, _ := res[1].(string)
		if v == releasedMarker {
			return nil, false, nil // an earlier sweep released it, and died before the catalog heard
		}
		return []byte(v), true, nil
	}
	return nil, false, nil
}

// reservationMarker names the marker a partition's commit leaves for the
// reservation of stimulus sid that ends at deadline: the stimulus and the
// reservation, so that each reservation of a stimulus (one released by
// the sweep, then another) is settled on its own.
func reservationMarker(sid string, deadline time.Time) string {
	return sid + "@" + hexTime(deadline)
}
