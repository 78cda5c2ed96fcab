package definition

import "github.com/weftworks/weft/internal/slots"

// ConcurrencyKey evaluates the key whose slots an instance started with
// input takes: the group its workflow's concurrency limit counts. input
// is the instance input as JSON decodes it into an any, nil for none. The
// engine calls it once, when the instance is created, and keeps the
// result for the instance's life; the expression sees input only, as no
// step has run. d.Concurrency must not be nil.
//
// # Results
//
// "" for a concurrency without a key: one key for all the workflow's
// instances, a global limit. Otherwise the key is written as the fairness
// key is (Definition.Order): a string as it is, a number or a boolean as
// in JSON, null as ""; a map or a list is refused, and so is a key longer
// than weft.MaxFairnessKey bytes or not valid UTF-8.
//
// # Errors
//
// An *OrderError with Field FieldConcurrencyKey, wrapping an *EvalError.
func (d *Definition) ConcurrencyKey(input any) (string, error) {
	key, err := evalKey(d.Concurrency.Key, Env{Input: input})
	if err != nil {
		return "", &OrderError{Field: FieldConcurrencyKey, Err: err}
	}
	return key, nil
}

// policy returns the effective policy: the empty one is slots.Queue.
func (c *Concurrency) policy() slots.Policy {
	if c.Policy == "" {
		return slots.Queue
	}
	return c.Policy
}
