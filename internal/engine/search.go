package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/query"
	"github.com/weftworks/weft/internal/store"
)

// Search attributes (docs/operations.md, "Search"): a definition's
// `search` names typed values computed from an instance's input and
// variables. The engine evaluates them at every commit, so that an
// attribute over vars follows the instance's progress, and the store
// indexes them with the commit. A value that does not fit its type is
// left out, with a warning in the log, never an instance's failure: an
// operator's index must not break a customer's workflow.

// searchOf returns the search attributes of an instance of def for its
// input and vars, nil when def declares none. warned holds the
// attributes already warned about in this execution (nil: warn of all),
// so that a value that never fits is logged once per run, not per commit;
// logCtx is the context it is logged with (the instance's trace).
func (e *Engine) searchOf(logCtx context.Context, def *definition.Definition, id string, input any, vars map[string]any, warned map[string]bool) weft.SearchAttributes {
	if len(def.Search) == 0 {
		return nil
	}
	attrs, problems := def.SearchValues(definition.Env{Input: input, Vars: vars})
	for _, p := range problems {
		if warned[p.Name] {
			continue
		}
		if warned != nil {
			warned[p.Name] = true
		}
		e.log.WarnContext(logCtx, "search attribute left out", "instance", id, "workflow", def.Name, "attribute", p.Name, "reason", p.Err)
	}
	return attrs
}

// registerSearch records the types of def's search attributes in the
// store's registry before def is saved: a name declared before with
// another type makes def invalid, as a problem at its path.
func (e *Engine) registerSearch(ctx context.Context, def *definition.Definition) error {
	types := def.SearchTypes()
	if len(types) == 0 {
		return nil
	}
	err := e.store.RegisterSearchAttributes(ctx, def.Name, types)
	if te := (*store.SearchTypeError)(nil); errors.As(err, &te) {
		return searchTypeProblem(def.Name, te)
	}
	if err != nil {
		return fmt.Errorf("engine: registering the search attributes of %s: %w", def.Name, err)
	}
	return nil
}

// checkSearch reports, as registerSearch would, a search attribute of def
// registered with another type, without registering anything.
func (e *Engine) checkSearch(ctx context.Context, def *definition.Definition) error {
	types := def.SearchTypes()
	if len(types) == 0 {
		return nil
	}
	attrs, err := e.store.SearchAttributes(ctx)
	if err != nil {
		return fmt.Errorf("engine: reading the search attributes: %w", err)
	}
	for _, a := range attrs {
		if t, ok := types[a.Name]; ok && t != a.Type {
			return searchTypeProblem(def.Name, &store.SearchTypeError{Name: a.Name, Type: t, Registered: a.Type, Workflow: a.Workflow})
		}
	}
	return nil
}

// searchTypeProblem is a definition's problem with a registered type.
func searchTypeProblem(workflow string, te *store.SearchTypeError) *weft.DefinitionError {
	return &weft.DefinitionError{Name: workflow, Problems: []weft.Problem{{
		Path:    "search." + te.Name + ".type",
		Message: fmt.Sprintf("%s: the search attribute %q is a %s for good (declared so by workflow %s): give this one another name", te.Type, te.Name, te.Registered, te.Workflow),
	}}}
}

// SearchInstances returns a page of the instances that f selects and the
// query text q matches (docs/operations.md, "Search"), and the cursor of
// the next page. The query is checked against the registered search
// attributes: an error matching weft.ErrInvalid (wrapping a
// *query.Error that says where) when it does not parse or type. It reads
// the index that narrows the most (a search attribute's values, else the
// workflow, status and creation indexes f and the query name), and
// evaluates the whole query on every instance it reads; a page may come
// back short, with a cursor, when few of the instances read match
// (weft.MaxExamine).
func (e *Engine) SearchInstances(ctx context.Context, q string, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	parsed, err := e.parseQuery(ctx, q)
	if err != nil {
		return nil, "", err
	}
	if !narrow(&f, parsed.Plan()) {
		return nil, "", nil // the query can match nothing
	}
	f.Match = func(inst *weft.Instance) bool { return parsed.Eval(instanceRecord{inst}) }
	items, next, err := e.store.ListInstances(ctx, f)
	if err != nil {
		return nil, "", fmt.Errorf("engine: searching instances: %w", err)
	}
	return items, next, nil
}

// parseQuery parses q and checks it against the registered search
// attributes; an error matching weft.ErrInvalid says what is wrong.
func (e *Engine) parseQuery(ctx context.Context, q string) (*query.Query, error) {
	parsed, err := query.Parse(q)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", weft.ErrInvalid, err)
	}
	attrs, err := e.store.SearchAttributes(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: reading the search attributes: %w", err)
	}
	schema := make(query.Schema, len(attrs))
	for _, a := range attrs {
		schema[a.Name] = a.Type
	}
	if err := parsed.Check(schema); err != nil {
		return nil, fmt.Errorf("%w: %w", weft.ErrInvalid, err)
	}
	return parsed, nil
}

// narrow sets the fields of f that the query's plan allows, for the
// store to read the fewest instances: a search attribute's range (its
// values first, else an interval), the workflow and the status when the
// query names one (and f none), the creation interval. It reports false
// when the plan says nothing can match. The query's Match decides the
// rest, so narrowing only ever skips instances it would refuse.
func narrow(f *weft.InstanceFilter, plan []query.Range) bool {
	var interval *query.Range
	for i := range plan {
		r := &plan[i]
		if r.Empty {
			return false
		}
		switch r.Field {
		case query.FieldWorkflow:
			if w, ok := single(r); ok {
				if f.Workflow != "" && f.Workflow != w {
					return false
				}
				f.Workflow = w
			}
		case query.FieldStatus:
			if s, ok := single(r); ok {
				if f.Status != "" && string(f.Status) != s {
					return false
				}
				f.Status = weft.Status(s)
			}
		case query.FieldCreatedAt:
			narrowCreated(f, r)
		case query.FieldID, query.FieldVersion, query.FieldUpdatedAt:
			// Not indexed: Match decides.
		default:
			switch {
			case r.Values != nil && (f.Search == nil || len(r.Values) < len(f.Search.In)):
				f.Search = searchRange(r)
			case r.Values == nil && interval == nil:
				interval = r
			}
		}
	}
	if f.Search == nil && interval != nil {
		f.Search = searchRange(interval)
	}
	return true
}

// single returns the one string value of a range of values.
func single(r *query.Range) (string, bool) {
	if len(r.Values) != 1 {
		return "", false
	}
	s, ok := r.Values[0].(string)
	return s, ok
}

// narrowCreated narrows f's creation interval ([CreatedFrom,
// CreatedBefore)) to the range's.
func narrowCreated(f *weft.InstanceFilter, r *query.Range) {
	if lo, ok := r.Lo.(time.Time); ok {
		if !r.LoInclusive {
			lo = lo.Add(time.Nanosecond)
		}
		if lo.After(f.CreatedFrom) {
			f.CreatedFrom = lo
		}
	}
	if hi, ok := r.Hi.(time.Time); ok {
		if r.HiInclusive {
			hi = hi.Add(time.Nanosecond)
		}
		if f.CreatedBefore.IsZero() || hi.Before(f.CreatedBefore) {
			f.CreatedBefore = hi
		}
	}
}

// searchRange is a plan's range of a search attribute as the store reads
// it. A keywords attribute's values are single keywords: strings.
func searchRange(r *query.Range) *weft.SearchRange {
	s := &weft.SearchRange{Name: r.Field, Type: r.Type, LoInc: r.LoInclusive, HiInc: r.HiInclusive}
	scalar := r.Type
	if scalar == weft.SearchKeywords {
		scalar = weft.SearchString
	}
	if r.Values != nil {
		s.In = make([]weft.SearchValue, len(r.Values))
		for i, v := range r.Values {
			s.In[i] = searchValue(scalar, v)
		}
		return s
	}
	if r.Lo != nil {
		v := searchValue(scalar, r.Lo)
		s.Lo = &v
	}
	if r.Hi != nil {
		v := searchValue(scalar, r.Hi)
		s.Hi = &v
	}
	return s
}

// searchValue is a plan's value (string, float64, bool or time.Time) as a
// weft.SearchValue of type t.
func searchValue(t weft.SearchType, v any) weft.SearchValue {
	sv := weft.SearchValue{Type: t}
	switch x := v.(type) {
	case string:
		sv.String = x
	case float64:
		sv.Number = x
	case bool:
		sv.Bool = x
	case time.Time:
		sv.Time = x
	}
	return sv
}

// instanceRecord shows an instance to a query: its built-in fields and
// its search attributes.
type instanceRecord struct{ *weft.Instance }

// Field implements query.Record.
func (r instanceRecord) Field(name string) (any, bool) {
	switch name {
	case query.FieldID:
		return r.ID, true
	case query.FieldWorkflow:
		return r.Workflow, true
	case query.FieldVersion:
		return float64(r.Version), true
	case query.FieldStatus:
		return string(r.Status), true
	case query.FieldCreatedAt:
		return r.CreatedAt, true
	case query.FieldUpdatedAt:
		return r.UpdatedAt, true
	}
	v, ok := r.Search[name]
	if !ok {
		return nil, false
	}
	return v.Native(), true
}
