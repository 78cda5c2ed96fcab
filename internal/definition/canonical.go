package definition

import (
	"strconv"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
)

// Canonical returns the definition's canonical encoding: the model written
// back as compact JSON in the source format, with map keys sorted, defaults
// filled in (persistence, retry policy, concurrency, a rate limit's burst),
// durations in time.Duration.String form and values as written
// (expressions unevaluated).
// Parse accepts it and yields an equal definition. Hash hashes it.
func (d *Definition) Canonical() []byte {
	b, err := jsonv.Marshal(d.canonical())
	if err != nil {
		// Every leaf is a string, bool, int, float64 or nil from the source,
		// and non-finite floats are refused when parsing.
		panic("definition: canonical encoding: " + err.Error())
	}
	return b
}

// MarshalJSON returns the canonical encoding.
func (d *Definition) MarshalJSON() ([]byte, error) { return d.Canonical(), nil }

func (d *Definition) canonical() map[string]any {
	m := map[string]any{
		"name":        d.Name,
		"persistence": string(d.persistence()),
		"steps":       canonicalSteps(d.Steps),
	}
	if len(d.Triggers) > 0 {
		ts := make([]any, len(d.Triggers))
		for i, t := range d.Triggers {
			ts[i] = map[string]any{"event": t.Event}
		}
		m["triggers"] = ts
	}
	putValue(m, "output", d.Output)
	// Only when set, so that the versions saved before the field existed
	// keep their hash.
	if d.Retention != nil {
		m["retention"] = d.Retention.String()
	}
	// Likewise priority and fairness, which are also left out when they
	// spell out the defaults (3; the key "" with weight 1), as absent.
	if n, ok := d.Priority.src.(int); d.Priority.src != nil && (!ok || n != weft.DefaultPriority) {
		m["priority"] = d.Priority.src
	}
	if f := d.Fairness; f != nil && f.Key.src != nil {
		weight := f.Weight.src
		if weight == nil {
			weight = weft.DefaultFairnessWeight
		}
		if f.Key.src != "" || weight != weft.DefaultFairnessWeight {
			m["fairness"] = map[string]any{"key": f.Key.src, "weight": weight}
		}
	}
	// Concurrency, only when set, with its policy spelt out; a key of ""
	// is left out, as absent: both are the one key "".
	if c := d.Concurrency; c != nil {
		cm := map[string]any{"limit": c.Limit, "policy": string(c.policy())}
		putKey(cm, c.Key)
		m["concurrency"] = cm
	}
	canonicalSearch(m, d.Search)
	// The record policy only when set, as written in its text form.
	if !d.Record.IsZero() {
		m["record"] = d.Record.String()
	}
	return m
}

func canonicalSteps(steps []*Step) []any {
	out := make([]any, 0, len(steps))
	for _, s := range steps {
		if s != nil {
			out = append(out, s.canonical())
		}
	}
	return out
}

func putValue(m map[string]any, key string, v Value) {
	if v.src != nil {
		m[key] = v.src
	}
}

func putDuration(m map[string]any, key string, d time.Duration) {
	if d != 0 {
		m[key] = d.String()
	}
}

func (s *Step) canonical() map[string]any {
	m := map[string]any{"id": s.ID}
	if s.Output != "" {
		m["output"] = s.Output
	}
	if s.Persist != "" {
		m["persist"] = string(s.Persist)
	}
	switch {
	case s.Activity != nil:
		a := s.Activity
		m["activity"] = a.Plugin + "." + a.Name
		putValue(m, "input", a.Input)
		putDuration(m, "timeout", a.Timeout)
		putDuration(m, "schedule_to_close", a.ScheduleToClose)
		putDuration(m, "heartbeat_timeout", a.HeartbeatTimeout)
		r := map[string]any{
			"max_attempts":     a.Retry.MaxAttempts,
			"initial_interval": a.Retry.InitialInterval.String(),
			"backoff":          a.Retry.Backoff,
			"max_interval":     a.Retry.MaxInterval.String(),
			"jitter":           a.Retry.Jitter,
		}
		if len(a.Retry.NonRetryable) > 0 {
			codes := make([]any, len(a.Retry.NonRetryable))
			for i, c := range a.Retry.NonRetryable {
				codes[i] = c
			}
			r["non_retryable"] = codes
		}
		m["retry"] = r
		canonicalStepLimits(m, a)
		if !a.Record.IsZero() {
			m["record"] = a.Record.String()
		}
	case s.Wait != nil:
		w := map[string]any{"event": s.Wait.Event}
		putValue(w, "key", s.Wait.Key)
		putDuration(w, "timeout", s.Wait.Timeout)
		putValue(w, "timeout", s.Wait.TimeoutExpr)
		m["wait"] = w
	case s.Kind == KindDelay:
		// A literal, in the short form or the long one, as it always was;
		// an expression as written; until in its own map.
		switch {
		case s.DelayUntil.src != nil:
			m["delay"] = map[string]any{"until": canonicalTime(s.DelayUntil)}
		case s.DelayExpr.src != nil:
			m["delay"] = s.DelayExpr.src
		default:
			m["delay"] = s.Delay.String()
		}
	case s.If != nil:
		m["if"] = s.If.Cond.src
		m["then"] = canonicalSteps(s.If.Then)
		if len(s.If.Else) > 0 {
			m["else"] = canonicalSteps(s.If.Else)
		}
	case s.Foreach != nil:
		m["foreach"] = s.Foreach.Items.src
		m["as"] = s.Foreach.As
		m["concurrency"] = s.Foreach.Concurrency
		m["do"] = canonicalSteps(s.Foreach.Do)
	case s.Kind == KindParallel:
		bs := make([]any, len(s.Parallel))
		for i, b := range s.Parallel {
			bs[i] = map[string]any{"steps": canonicalSteps(b.Steps)}
		}
		m["parallel"] = bs
	case s.Workflow != nil:
		m["workflow"] = s.Workflow.Name
		putValue(m, "input", s.Workflow.Input)
	case s.Kind == KindSet:
		set := make(map[string]any, len(s.Set))
		for _, a := range s.Set {
			set[a.Name] = a.Value.src
		}
		m["set"] = set
	case s.Fail != nil:
		f := map[string]any{"code": s.Fail.Code}
		putValue(f, "message", s.Fail.Message)
		m["fail"] = f
	}
	return m
}

// canonicalTime is an until's canonical form: a literal as the instant in
// UTC, so that the offset it was written with does not make a version; an
// expression as written.
func canonicalTime(v Value) any {
	if s, ok := v.src.(string); ok && v.IsConst() {
		if t, err := parseTime(s); err == nil {
			return t.UTC().Format(time.RFC3339Nano)
		}
	}
	return v.src
}

// joinIndex appends an index to a path: steps → steps[2].
func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// joinKey appends a map key to a path: input → input.amount, or
// input["a.b"] when the key is not a plain name.
func joinKey(path, key string) string {
	plain := key != ""
	for i := 0; i < len(key) && plain; i++ {
		c := key[i]
		plain = c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
	}
	if !plain {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" || path == RootPath {
		return key
	}
	return path + "." + key
}
