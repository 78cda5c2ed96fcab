package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/store"
)

// stimDoc is the part of a stimulus record that never changes, kept under
// "doc"; the state and settlement are fields of their own, which scripts
// write.
type stimDoc struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Key       string          `json:"key,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
}

func stimDocOf(st weft.Stimulus, now time.Time) ([]byte, error) {
	return jsonv.Marshal(stimDoc{ID: st.ID, Name: st.Name, Key: st.Key, Payload: st.Payload, CreatedAt: now, ExpiresAt: st.ExpiresAt.UTC()})
}

// decodeStimulus builds a stimulus from a stimulus hash as HGETALL lists
// it (field, value, …).
func decodeStimulus(v any) (*weft.Stimulus, error) {
	l, _ := v.([]any)
	f := make(map[string]string, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		k, _ := l[i].(string)
		val, _ := l[i+1].(string)
		f[k] = val
	}
	var d stimDoc
	if err := json.Unmarshal([]byte(f["doc"]), &d); err != nil {
		return nil, fmt.Errorf("corrupt stimulus record: %w", err)
	}
	st := &weft.Stimulus{
		ID: d.ID, Name: d.Name, Key: d.Key, Payload: d.Payload, CreatedAt: d.CreatedAt, ExpiresAt: d.ExpiresAt,
		State: weft.StimulusState(f["state"]), DeliveredTo: f["to"],
	}
	if out := f["out"]; out != "" {
		st.Outcome = json.RawMessage(out)
	}
	if set := f["set"]; set != "" {
		t, err := parseHexTime(set)
		if err != nil {
			return nil, fmt.Errorf("stimulus %q: settled: %w", d.ID, err)
		}
		st.SettledAt = t
	}
	return st, nil
}

// existing reads the {"exists", fields} answer of a script; nil for "ok".
func (s *Store) existing(op, id string, res any) (*weft.Stimulus, error) {
	reason, rest, _ := refusal(res)
	switch {
	case reason == "ok":
		return nil, nil
	case reason == "exists" && len(rest) == 1:
		st, err := decodeStimulus(rest[0])
		if err != nil {
			return nil, s.corrupt(err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("redisstore: %s %q on %s: unexpected answer %v", op, id, s.addr, res)
}

// queuePrefix is the start of the queue members of (name, key); a member
// goes on with the 20-digit queue sequence and the id.
func queuePrefix(name, key string) []byte { return tup(nil, name, key) }

// EnqueueStimulus implements store.Store.
func (s *Store) EnqueueStimulus(ctx context.Context, st weft.Stimulus) (*weft.Stimulus, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := store.ValidateStimulus(st); err != nil {
		return nil, err
	}
	doc, err := stimDocOf(st, s.now())
	if err != nil {
		return nil, fmt.Errorf("redisstore: stimulus %q: %w", st.ID, err)
	}
	res, err := s.write(ctx, enqueueScript, s.args(st.ID, doc, hexTime(st.ExpiresAt), queuePrefix(st.Name, st.Key))).Result()
	if err != nil {
		return nil, s.fail(ctx, "enqueue stimulus", st.ID, err)
	}
	return s.existing("enqueue stimulus", st.ID, res)
}

// Deliver implements store.Store. The stimulus is recorded with
// DeliveredTo set to the instance of the first message written, or empty
// when no message was.
func (s *Store) Deliver(ctx context.Context, st *weft.Stimulus, msgs []weft.Message) (*weft.Stimulus, error) {
	existing, _, err := s.deliverTo(ctx, st, msgs)
	return existing, err
}

// deliverTo is Deliver, answering also the ids of the outbox entries it
// wrote, in order. In a catalog (roleCatalog), which holds no instance,
// the messages go into the outbox (deliverOutboxScript) for the router to
// relay, which has dropped those for instances that do not exist: the
// stimulus's DeliveredTo is the first message's target. In the other roles
// they go into the inboxes (deliverScript), and there are no entries.
func (s *Store) deliverTo(ctx context.Context, st *weft.Stimulus, msgs []weft.Message) (existing *weft.Stimulus, eids []string, err error) {
	if err := s.begin(ctx); err != nil {
		return nil, nil, err
	}
	if err := store.ValidateDeliver(st, msgs); err != nil {
		return nil, nil, err
	}
	if st == nil && len(msgs) == 0 {
		return nil, nil, nil
	}
	now := s.now()
	a := s.args("", "", "", "", hexTime(now), "")
	id := ""
	if st != nil {
		id = st.ID
		doc, err := stimDocOf(*st, now)
		if err != nil {
			return nil, nil, fmt.Errorf("redisstore: stimulus %q: %w", st.ID, err)
		}
		a = s.args(st.ID, doc, hexTime(st.ExpiresAt), []byte(compact(st.Outcome)), hexTime(now), hexTime(now.Add(s.cfg.DeliveredRetention)))
	}
	a, err = messageArgs(a, msgs, now)
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: deliver: message: %w", err)
	}
	if s.cfg.role != roleCatalog {
		res, err := s.write(ctx, deliverScript, a).Result()
		if err != nil {
			return nil, nil, s.fail(ctx, "deliver stimulus", id, err)
		}
		existing, err := s.existing("deliver stimulus", id, res)
		return existing, nil, err
	}
	res, err := s.write(ctx, deliverOutboxScript, a).Result()
	if err != nil {
		return nil, nil, s.fail(ctx, "deliver stimulus", id, err)
	}
	if reason, rest, _ := refusal(res); reason == "ok" {
		if eids, ok := outboxIDs(rest); ok {
			return nil, eids, nil
		}
		return nil, nil, fmt.Errorf("redisstore: deliver stimulus %q on %s: unexpected answer %v", id, s.addr, res)
	}
	existing, err = s.existing("deliver stimulus", id, res)
	return existing, nil, err
}

// Inbox implements store.Store.
func (s *Store) Inbox(ctx context.Context, id string) ([]weft.Message, error) {
	var hg *redis.MapStringStringCmd
	if _, err := s.ofInstance(ctx, "inbox of instance", id, func(p redis.Pipeliner) {
		hg = p.HGetAll(ctx, s.p+"m:"+id)
	}); err != nil {
		return nil, err
	}
	var out []weft.Message
	for _, v := range hg.Val() {
		m, err := parseMessage(id, v)
		if err != nil {
			return nil, s.corrupt(err)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b weft.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// GetStimulus implements store.Store.
func (s *Store) GetStimulus(ctx context.Context, id string) (*weft.Stimulus, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	f, err := s.c.HGetAll(ctx, s.p+"s:"+id).Result()
	if err != nil {
		return nil, s.fail(ctx, "get stimulus", id, err)
	}
	if len(f) == 0 {
		return nil, store.NotFound("stimulus %q", id)
	}
	l := make([]any, 0, 2*len(f))
	for k, v := range f {
		l = append(l, k, v)
	}
	st, err := decodeStimulus(l)
	if err != nil {
		return nil, s.corrupt(fmt.Errorf("stimulus %q: %w", id, err))
	}
	return st, nil
}

// PendingStimuli implements store.Store.
func (s *Store) PendingStimuli(ctx context.Context, name, key string) ([]weft.Stimulus, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	now := s.now()
	qp := queuePrefix(name, key)
	res, err := s.run(ctx, pendingScript, s.args(qp, prefixEnd(qp))).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "pending stimuli of", name, err)
	}
	var out []weft.Stimulus
	for _, v := range res {
		st, err := decodeStimulus(v)
		if err != nil {
			return nil, s.corrupt(err)
		}
		if st.State == weft.StimulusQueued && st.ExpiresAt.After(now) {
			out = append(out, *st)
		}
	}
	return out, nil
}

// ExpireStimuli implements store.Store.
func (s *Store) ExpireStimuli(ctx context.Context, now time.Time, limit int) ([]weft.Stimulus, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	now = now.UTC()
	res, err := s.write(ctx, expireScript, s.args(hexTime(now), upTo(now), weft.ClampLimit(limit), hexTime(now.Add(s.cfg.DeadLetterRetention)))).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "expire stimuli at", now.Format(time.RFC3339Nano), err)
	}
	var dead []weft.Stimulus
	for _, v := range res {
		st, err := decodeStimulus(v)
		if err != nil {
			return nil, s.corrupt(err)
		}
		dead = append(dead, *st)
	}
	return dead, nil
}

// DeadLetters implements store.Store.
func (s *Store) DeadLetters(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	return s.stimulusPage(ctx, "sd", "dead letters after", cursor, limit)
}

// QueuedStimuli implements store.Store.
func (s *Store) QueuedStimuli(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	return s.stimulusPage(ctx, "sx", "queued stimuli after", cursor, limit)
}

// stimulusPage reads a page of the stimuli the (time, id) index names,
// in member order; op names the read in errors.
func (s *Store) stimulusPage(ctx context.Context, index, op, cursor string, limit int) ([]weft.Stimulus, string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, "", err
	}
	min := "-"
	if cursor != "" {
		after, err := decodeCursor(cursor, 17)
		if err != nil {
			return nil, "", err
		}
		min = "(" + after
	}
	limit = weft.ClampLimit(limit)
	res, err := s.run(ctx, stimulusPageScript, s.args(index, min, limit+1)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", s.fail(ctx, op, cursor, err)
	}
	var out []weft.Stimulus
	var next string
	for i := 0; i+1 < len(res); i += 2 {
		if len(out) == limit {
			prev, _ := res[i-2].(string)
			next = encodeCursor(prev)
			break
		}
		st, err := decodeStimulus(res[i+1])
		if err != nil {
			return nil, "", s.corrupt(err)
		}
		out = append(out, *st)
	}
	return out, next, nil
}

// WaitingInboxes implements store.Store.
func (s *Store) WaitingInboxes(ctx context.Context, before time.Time, limit int) ([]string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if !before.After(time.Unix(0, 0)) {
		return nil, nil
	}
	ms, err := s.c.ZRangeByLex(ctx, s.p+"mw", &redis.ZRangeBy{Min: "-", Max: "(" + hexTime(before), Count: int64(weft.ClampLimit(limit))}).Result()
	if err != nil {
		return nil, s.fail(ctx, "waiting inboxes before", before.UTC().Format(time.RFC3339Nano), err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		if len(m) < 17 {
			return nil, s.corrupt(fmt.Errorf("corrupt inbox-wait member %q", m))
		}
		out = append(out, m[16:])
	}
	return out, nil
}
