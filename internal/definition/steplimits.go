package definition

import (
	"strings"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/slots"
)

// StepConcurrency is an activity step's concurrency limit: at most Limit
// attempts with the same key run at once, counted across every step, of
// any workflow, that names the key. An attempt that finds every slot of
// its key taken waits its turn, durably (docs/flow-control.md, "Step
// limits"); a step has no other policy, as cancelling belongs to whole
// instances (Concurrency.Policy).
type StepConcurrency struct {
	// Key names the group the limit counts, shared by value with the
	// other steps that name it: a literal string or an expression or
	// template over input, vars and the enclosing foreach steps' loop
	// variables, evaluated when the step starts (use EvalKey); at most
	// weft.MaxFairnessKey bytes. Zero when absent: the step's own key.
	Key Value
	// Limit is how many attempts of one key may run at once: an integer
	// literal from 1 to MaxConcurrencyLimit. Required.
	Limit int
	// limitReported: the limit is absent or not an integer, and the
	// parser reported it (or a field that is likely it misspelt), so
	// validation does not report it again.
	limitReported bool
}

// StepRateLimit is an activity step's rate limit: the starts of the
// attempts with the same key are spaced so that, on average, no more than
// Limit.Count start per Limit.Per, and at most Limit.Burst at once after a
// quiet period (the GCRA of internal/ratelimit). The key's budget is
// shared by value with every step, of any workflow, that names it; each
// attempt is admitted by its own step's Limit.
type StepRateLimit struct {
	// Key names the budget, as StepConcurrency.Key does: zero when absent,
	// the step's own key (use EvalKey).
	Key Value
	// Limit is the rate, integer and duration literals: Count from 1 to
	// ratelimit.MaxCount (required), Per from ratelimit.MinPer to
	// ratelimit.MaxPer (required), Burst from 1 to ratelimit.MaxCount. A
	// parsed definition has Burst 1 when it says none; 0, in one built in
	// code, is read as 1, as package ratelimit reads it.
	Limit ratelimit.Limit
	// countReported and perReported: the field is absent or malformed,
	// and the parser reported it (or a field that is likely it misspelt),
	// so validation does not report it again.
	countReported, perReported bool
}

// EvalKey evaluates the key of a step's concurrency limit in env, the
// step's environment (input, vars and the loop variables of the
// enclosing foreach steps), as its input is evaluated: the runner does
// so when the step starts, and every attempt of the step then uses that
// key. c must not be nil.
//
// # Results
//
// "" when the limit has no key, or its key yields "" or null: the engine
// then uses the step's own key. Otherwise the key is written as a
// workflow's concurrency key is (Definition.ConcurrencyKey): a string as
// it is, a number or a boolean as in JSON; a map or a list is refused, and
// so is a key longer than weft.MaxFairnessKey bytes or not valid UTF-8.
//
// # Errors
//
// An *EvalError, naming the key as written.
func (c *StepConcurrency) EvalKey(env Env) (string, error) {
	return evalKey(c.Key, env)
}

// EvalKey evaluates the key of a step's rate limit in env, as
// StepConcurrency.EvalKey does: "" when absent (the step's own key).
// Errors are *EvalError. r must not be nil.
func (r *StepRateLimit) EvalKey(env Env) (string, error) {
	return evalKey(r.Key, env)
}

// stepConcurrency decodes an activity step's concurrency: a map with a
// limit, an optional key over the step's scope and an optional policy,
// which can only be queue and is checked here, as the model does not keep
// it.
func (d *decoder) stepConcurrency(f field, scope []string) *StepConcurrency {
	cfs, order, ok := d.fields(f.val, f.path, "a map with a limit and an optional key, such as {limit: 2}")
	if !ok {
		return nil
	}
	fields := []string{"key", "limit", "policy"}
	d.unknown(cfs, order, fields...)
	c := &StepConcurrency{}
	if kf, ok := cfs["key"]; ok {
		c.Key = d.keyIn(kf, compiler{scope: scope})
	}
	c.Limit, c.limitReported = d.literalInt(f, cfs, order, fields, intField{
		name:     "limit",
		max:      MaxConcurrencyLimit,
		required: "how many attempts of one key may run at once",
		same:     "a limit is a literal, the same for every attempt",
	})
	if pf, ok := cfs["policy"]; ok {
		if p, ok := d.str(pf); ok {
			d.stepPolicy(pf, p)
		}
	}
	return c
}

// stepPolicy reports a step's concurrency policy other than queue (or ""):
// the cancel policies by what they do, others as unknown.
func (d *decoder) stepPolicy(f field, p string) {
	switch slots.Policy(p) {
	case "", slots.Queue:
	case slots.CancelNewest, slots.CancelOldest:
		d.problem(f.val, f.path, "policy %s applies to workflows only: it cancels whole instances, and a step's attempts can only wait their turn (queue, the default); set it on the workflow's concurrency", p)
	default:
		if hint := didYouMean(p, []string{string(slots.Queue)}); hint != "" {
			d.problem(f.val, f.path, "unknown policy %q%s", p, hint)
		} else {
			d.problem(f.val, f.path, "unknown policy %q; a step's only policy is queue (the default): cancel_newest and cancel_oldest apply to workflows only", p)
		}
	}
}

// stepRateLimit decodes an activity step's rate_limit: a map with a limit
// and a per, an optional key over the step's scope and an optional burst.
// The integers and the duration are literals, whose ranges validate
// checks (Limit.Check), except a burst below 1: the model's 0 is 1, so
// that is refused here.
func (d *decoder) stepRateLimit(f field, scope []string) *StepRateLimit {
	rfs, order, ok := d.fields(f.val, f.path, "a map with a limit, a per, an optional key and an optional burst, such as {limit: 10, per: 1s}")
	if !ok {
		return nil
	}
	fields := []string{"key", "limit", "per", "burst"}
	d.unknown(rfs, order, fields...)
	r := &StepRateLimit{Limit: ratelimit.Limit{Burst: 1}}
	if kf, ok := rfs["key"]; ok {
		r.Key = d.keyIn(kf, compiler{scope: scope})
	}
	r.Limit.Count, r.countReported = d.literalInt(f, rfs, order, fields, intField{
		name:     "limit",
		max:      ratelimit.MaxCount,
		required: "how many attempts of one key may start per period",
		same:     "a limit is a literal, the same for every attempt",
	})
	r.Limit.Per, r.perReported = d.period(f, rfs, order, fields)
	if _, ok := rfs["burst"]; ok {
		burst, reported := d.literalInt(f, rfs, order, fields, intField{
			name: "burst",
			max:  ratelimit.MaxCount,
			same: "a burst is a literal, the same for every attempt",
		})
		if !reported && burst < 1 {
			d.problem(rfs["burst"].val, rfs["burst"].path, "burst %d is out of range: want 1 to %d (1, the default, spaces every start)", burst, ratelimit.MaxCount)
			reported = true
		}
		if !reported {
			r.Limit.Burst = burst
		}
	}
	return r
}

// period decodes a rate limit's per, a duration literal, and reports
// whether a problem was: absent (unless a field is likely it misspelt),
// an expression, or not a duration.
func (d *decoder) period(parent field, fs map[string]field, order, fields []string) (per time.Duration, reported bool) {
	f, ok := fs["per"]
	switch {
	case !ok:
		if !misspelt(order, fields, "per") {
			d.problem(parent.val, joinKey(parent.path, "per"), "required: the period, a duration from %s to %s such as 1s or 1m", ratelimit.MinPer, ratelimit.MaxPer)
		}
		return 0, true
	case hasExpr(f.val):
		d.problem(f.val, f.path, "got an expression, want a duration from %s to %s: a period is a literal, the same for every attempt", ratelimit.MinPer, ratelimit.MaxPer)
		return 0, true
	}
	per, ok = d.duration(f)
	return per, !ok
}

// stepLimits checks the literals of an activity step's limits: the
// ranges (the rate limit's by ratelimit.Limit.Check) and a literal key's
// length; a computed key is checked when evaluated (EvalKey).
func (v *validator) stepLimits(path string, a *Activity) {
	if c := a.Concurrency; c != nil {
		cp := path + ".concurrency"
		v.literalKey(cp+".key", c.Key)
		if !c.limitReported && (c.Limit < 1 || c.Limit > MaxConcurrencyLimit) {
			v.problem(cp+".limit", "limit %d is out of range: want an integer from 1 to %d", c.Limit, MaxConcurrencyLimit)
		}
	}
	r := a.RateLimit
	if r == nil {
		return
	}
	rp := path + ".rate_limit"
	v.literalKey(rp+".key", r.Key)
	// Each field alone, the others valid, so that every problem is
	// reported at its own path.
	ok := ratelimit.Limit{Count: 1, Per: ratelimit.MinPer, Burst: 1}
	check := func(field string, l ratelimit.Limit) {
		if err := l.Check(); err != nil {
			v.problem(rp+"."+field, "%s", strings.TrimPrefix(err.Error(), ratelimit.ErrLimit.Error()+": "))
		}
	}
	if !r.countReported {
		l := ok
		l.Count = r.Limit.Count
		check("limit", l)
	}
	if !r.perReported {
		l := ok
		l.Per = r.Limit.Per
		check("per", l)
	}
	l := ok
	l.Burst = r.Limit.Burst
	check("burst", l)
}

// canonicalStepLimits writes an activity step's limits into its canonical
// form m, each only when set, so that the versions saved before they
// existed keep their hash: with the default burst spelt out, and a key of
// "" left out, as absent (both are the step's own key).
func canonicalStepLimits(m map[string]any, a *Activity) {
	if c := a.Concurrency; c != nil {
		cm := map[string]any{"limit": c.Limit}
		putKey(cm, c.Key)
		m["concurrency"] = cm
	}
	if r := a.RateLimit; r != nil {
		rm := map[string]any{
			"limit": r.Limit.Count,
			"per":   r.Limit.Per.String(),
			"burst": r.Limit.EffectiveBurst(),
		}
		putKey(rm, r.Key)
		m["rate_limit"] = rm
	}
}

// putKey writes a key as written, unless it is absent or "".
func putKey(m map[string]any, key Value) {
	if key.src != nil && key.src != "" {
		m["key"] = key.src
	}
}
