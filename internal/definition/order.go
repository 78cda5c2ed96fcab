package definition

import (
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"

	"github.com/weftworks/weft/host/weft"
)

// The fields evaluated when an instance is created, as OrderError.Field
// names them: those Order evaluates, and the one ConcurrencyKey does.
const (
	FieldPriority       = "priority"
	FieldFairnessKey    = "fairness.key"
	FieldFairnessWeight = "fairness.weight"
	FieldConcurrencyKey = "concurrency.key"
)

// OrderError is the error of Definition.Order and
// Definition.ConcurrencyKey: one of the fields decided when an instance is
// created (where it goes in the ready queue, its concurrency key) could
// not be evaluated for its input, or yielded what the field cannot be. It
// wraps an *EvalError, so it matches ErrEval, and names the field, since
// the expression alone does not say where it is.
type OrderError struct {
	// Field is FieldPriority, FieldFairnessKey, FieldFairnessWeight or
	// FieldConcurrencyKey.
	Field string
	// Err is the *EvalError: the value as written and what is wrong.
	Err error
}

// Error implements error: `priority: expression "${ input.tier }": got 7,
// want an integer from 1 to 5`.
func (e *OrderError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the *EvalError.
func (e *OrderError) Unwrap() error { return e.Err }

// Order evaluates where an instance started with input goes in the ready
// queue: its priority (weft.HighestPriority … weft.LowestPriority), its fairness key
// and the key's weight (1 … weft.MaxFairnessWeight), with the defaults applied
// to what the definition leaves out (weft.DefaultPriority, "", and
// weft.DefaultFairnessWeight). input is the instance input as JSON decodes it
// into an any, nil for none. The engine calls it once, when the instance
// is created; expressions see input only, as no step has run.
//
// # Results
//
// A priority or a weight must be an integer (a float with no fraction,
// as JSON numbers are, will do) in its range; null yields the default, so
// that `${ input.priority }` leaves an input without one at the default.
// A key is written as a template writes a result: a string as it is, a
// number or a boolean as in JSON, null as "" (the shared lane); a map or
// a list is refused, and so is a key longer than weft.MaxFairnessKey bytes
// or not valid UTF-8.
//
// # Errors
//
// The first field that fails, in the order priority, fairness.key,
// fairness.weight, as an *OrderError wrapping an *EvalError.
//
// priority, when not 0, is the start's own: the definition's is then not
// evaluated (it cannot refuse a start that chose its priority).
func (d *Definition) Order(input any, priority int) (weft.Order, error) {
	env := Env{Input: input}
	var err error
	if priority == 0 {
		if priority, err = evalInt(d.Priority, env, weft.DefaultPriority, weft.HighestPriority, weft.LowestPriority); err != nil {
			return weft.Order{}, &OrderError{Field: FieldPriority, Err: err}
		}
	}
	o := weft.Order{Priority: priority, FairnessWeight: weft.DefaultFairnessWeight}
	if f := d.Fairness; f != nil {
		if o.FairnessKey, err = evalKey(f.Key, env); err != nil {
			return weft.Order{}, &OrderError{Field: FieldFairnessKey, Err: err}
		}
		if o.FairnessWeight, err = evalInt(f.Weight, env, weft.DefaultFairnessWeight, 1, weft.MaxFairnessWeight); err != nil {
			return weft.Order{}, &OrderError{Field: FieldFairnessWeight, Err: err}
		}
	}
	return o, nil
}

// evalInt evaluates an integer in [lo, hi]: def when v is absent or
// yields null. Errors are *EvalError.
func evalInt(v Value, env Env, def, lo, hi int) (int, error) {
	x, err := v.Eval(env)
	if err != nil {
		return 0, err
	}
	if x == nil {
		return def, nil
	}
	n, ok := integral(x)
	switch {
	case !ok:
		err = fmt.Errorf("got %s, want an integer from %d to %d", resultName(x), lo, hi)
	case n < int64(lo) || n > int64(hi):
		err = fmt.Errorf("got %s, want an integer from %d to %d", stringify(x), lo, hi)
	default:
		return int(n), nil
	}
	return 0, &EvalError{Source: sourceString(v.src), Err: err}
}

// integral returns x as an int64 when it is a number without a fraction
// within int64's range: an integer of any Go type, or a float such as
// JSON's 2.
func integral(x any) (int64, bool) {
	rv := reflect.ValueOf(x)
	switch {
	case rv.CanInt():
		return rv.Int(), true
	case rv.CanUint():
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), true
		}
		return math.MaxInt64, true // out of every range all the same
	case rv.CanFloat():
		f := rv.Float()
		if f != math.Trunc(f) || math.IsInf(f, 0) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

// resultName names what a number-wanting field got instead: a number with
// a fraction is shown, as "a number" would not say what is wrong with it.
func resultName(x any) string {
	if rv := reflect.ValueOf(x); rv.IsValid() && rv.CanFloat() {
		return formatFloat(rv.Float())
	}
	return typeName(x)
}

// evalKey evaluates a key, a fairness key or a concurrency key: a string
// as it is, a number or a boolean as in JSON, null (or an absent v) as "".
// Errors are *EvalError.
func evalKey(v Value, env Env) (string, error) {
	x, err := v.Eval(env)
	if err != nil {
		return "", err
	}
	if _, isList := toList(x); isList || reflect.ValueOf(x).Kind() == reflect.Map {
		err = fmt.Errorf("got %s, want a string (a number or a boolean is written as in JSON, null as \"\")", typeName(x))
		return "", &EvalError{Source: sourceString(v.src), Err: err}
	}
	key := stringify(x)
	switch {
	case len(key) > weft.MaxFairnessKey:
		err = fmt.Errorf("the key is %d bytes long; the limit is %d", len(key), weft.MaxFairnessKey)
	case !utf8.ValidString(key):
		err = fmt.Errorf("the key %q is not valid UTF-8", key)
	default:
		return key, nil
	}
	return "", &EvalError{Source: sourceString(v.src), Err: err}
}
