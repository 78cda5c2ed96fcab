package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/query"
)

// Document is a batch job as an operator asks for it (POST /v1/batches,
// weft batch start): one operation, the instances it applies to — the
// ones a query matches or a list of ids, exactly one of the two — why,
// how fast, and the operation's arguments.
//
// As JSON:
//
//	{"op": "signal", "query": "customer = \"acme\" AND status = \"suspended\"",
//	 "reason": "payment arrived", "rate": 200, "hold": true,
//	 "args": {"event": "paid", "key": "acme", "payload": {"amount": 12}}}
type Document struct {
	// Op is the operation applied to each instance; required.
	Op weft.BatchOp
	// Query selects the instances an instance query matches
	// (internal/query's language), at the batch's creation; its
	// attribute names are checked by the engine, against the registry.
	// ParseDocument leaves it in the query's canonical form.
	Query string
	// IDs selects the instances by id: 1 to weft.MaxBatchIDs of them,
	// none twice, in the order they are applied.
	IDs []string
	// Reason is why, as the operator says it; each instance's history
	// entry carries it. At most MaxReason bytes.
	Reason string
	// Rate bounds the instances applied per second: nil for DefaultRate,
	// 0 for no limit (the host's own bound still applies). Limit reads it.
	Rate *float64
	// Hold stops the batch once its instances are selected, with their
	// count, until an operator confirms it.
	Hold bool
	// DryRun, for a migrate alone, answers per instance whether it can
	// move and why not, and moves none.
	DryRun bool
	// Args are the operation's arguments; only those of Op may be set.
	Args Args
}

// Args are the arguments of the operations that take some: signal,
// migrate and reset. The others take none.
type Args struct {
	// Event is the event a signal sends (the event name rules of the
	// definitions' wait steps); required for a signal.
	Event string
	// Key, when set, sends a signal only to the waits for Event with this
	// key; empty: to every wait for Event.
	Key string
	// Payload is the signal's payload, a JSON value; nil when absent.
	// ParseDocument leaves it compact, its object keys sorted.
	Payload json.RawMessage
	// ToVersion is the workflow version a migrate moves each instance
	// to; 0 for the workflow's latest.
	ToVersion int
	// Plugins are the plugin versions a migrate pins (plugin name → the
	// version's sha256, 64 lowercase hex digits), over the instance's.
	Plugins map[string]string
	// Retry continues each migrated instance that failed, from its
	// failed step; Resume resumes each migrated instance that was paused.
	// At most one of them.
	Retry  bool
	Resume bool
	// Step is the top-level step a reset runs each instance again from;
	// required for a reset.
	Step string
}

// Bounds and defaults of a document.
const (
	// DefaultRate is the rate of a document that gives none, in instances
	// per second.
	DefaultRate = 1000.0
	// MaxReason bounds a document's reason, in bytes.
	MaxReason = 1024
	// MaxDocument bounds a document, in bytes: room for weft.MaxBatchIDs
	// ids of weft.MaxIDLen bytes each, and the rest.
	MaxDocument = 4 << 20
)

// Limit is the rate the batch is applied at, in instances per second:
// Rate, or DefaultRate when the document gives none; 0 is no limit.
func (d *Document) Limit() float64 {
	if d.Rate == nil {
		return DefaultRate
	}
	return *d.Rate
}

// docFields are the JSON fields of a document, in canonical order.
func docFields() []string {
	return []string{"op", "query", "ids", "reason", "rate", "hold", "dry_run", "args"}
}

// argsFields are the JSON fields of a document's args, in canonical order.
func argsFields() []string {
	return []string{"event", "key", "payload", "to_version", "plugins", "retry", "resume", "step"}
}

// argsOf lists the args an operation takes, in canonical order; nil for
// one that takes none.
func argsOf(op weft.BatchOp) []string {
	switch op {
	case weft.BatchSignal:
		return []string{"event", "key", "payload"}
	case weft.BatchMigrate:
		return []string{"to_version", "plugins", "retry", "resume"}
	case weft.BatchReset:
		return []string{"step"}
	}
	return nil
}

// ParseDocument reads and checks a batch document, a JSON object. It is
// strict: an unknown field, a field given twice, a value of the wrong type
// and an argument of another operation are problems, as are the rules of
// each field; every problem comes back at once in a *weft.BatchError (matching
// weft.ErrInvalid), each with its path. A null field is taken as absent.
// A query that does not parse is a problem at path query whose message
// says where (`at 12 ("ANDD"): …`, the parser's byte offset and token).
func ParseDocument(data []byte) (*Document, error) {
	var p parser
	if len(data) > MaxDocument {
		p.add("", "the document is %d bytes, more than %d", len(data), MaxDocument)
		return nil, p.errs.err()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			p.add("", "the document is empty")
		} else {
			p.add("", "not JSON: %s", jsonError(err))
		}
		return nil, p.errs.err()
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		p.add("", "more than one JSON value: want one object")
		return nil, p.errs.err()
	}
	d, given := p.document(raw)
	if d == nil {
		return nil, p.errs.err()
	}
	// The rules of each field, and those between fields, are checked too,
	// so that one answer names every problem; a field that failed to
	// decode was left zero, and is not reported again.
	var rules problems
	d.check(&rules, func(path string) bool { return given[path] })
	bad, around := map[string]bool{}, map[string]bool{}
	for _, pr := range p.errs {
		bad[pr.Path] = true
		for _, a := range ancestors(pr.Path) {
			around[a] = true
		}
	}
	for _, pr := range rules {
		if !bad[pr.Path] && !around[pr.Path] && !slices.ContainsFunc(ancestors(pr.Path), func(a string) bool { return bad[a] }) {
			p.errs = append(p.errs, pr)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.errs.err()
	}
	if d.Query != "" {
		q, _ := query.Parse(d.Query) // check parsed it
		d.Query = q.String()
	}
	return d, nil
}

// Validate checks a document built in Go (a client's, a test's) by the
// rules ParseDocument applies to the values it read, and returns a
// *weft.BatchError with every problem, or nil. A field is given when it is not its
// zero value.
func (d *Document) Validate() error {
	var ps problems
	d.check(&ps, func(path string) bool {
		switch path {
		case "query":
			return d.Query != ""
		case "ids":
			return d.IDs != nil
		case "rate":
			return d.Rate != nil
		}
		a := d.Args
		switch name, _ := strings.CutPrefix(path, "args."); name {
		case "event":
			return a.Event != ""
		case "key":
			return a.Key != ""
		case "payload":
			return a.Payload != nil
		case "to_version":
			return a.ToVersion != 0
		case "plugins":
			return a.Plugins != nil
		case "retry":
			return a.Retry
		case "resume":
			return a.Resume
		case "step":
			return a.Step != ""
		}
		return false
	})
	return ps.err()
}

// check adds the problems of d's values to ps; given reports whether the
// field at a path (query, ids, rate, args.<name>) was given, since a zero
// value may have been.
func (d *Document) check(ps *problems, given func(path string) bool) {
	opValid := slices.Contains(weft.BatchOps(), d.Op)
	switch {
	case d.Op == "":
		ps.add("op", "is required: one of %s", opList())
	case !opValid:
		ps.add("op", "unknown operation %q; want one of %s", d.Op, opList())
	}

	switch q, ids := given("query"), given("ids"); {
	case q && ids:
		ps.add("", "both query and ids are given: give one, the query that selects the instances or their ids")
	case !q && !ids:
		ps.add("", "give query (an instance query) or ids (a list of instance ids), to select the instances")
	case q:
		if _, err := query.Parse(d.Query); err != nil {
			ps.add("query", "%s", strings.TrimPrefix(err.Error(), "query: "))
		}
	default:
		d.checkIDs(ps)
	}

	if len(d.Reason) > MaxReason {
		ps.add("reason", "is %d bytes, more than %d", len(d.Reason), MaxReason)
	}
	if given("rate") && d.Rate != nil {
		if r := *d.Rate; math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
			ps.add("rate", "%v is not a number of instances per second at least 0 (0: no limit)", r)
		}
	}
	if d.DryRun && d.Op != weft.BatchMigrate && opValid {
		ps.add("dry_run", "only a migrate has a dry run, not a %s", d.Op)
	}

	if !opValid {
		return // whose args they are is not known
	}
	takes := argsOf(d.Op)
	for _, name := range argsFields() {
		if given("args."+name) && !slices.Contains(takes, name) {
			if len(takes) == 0 {
				ps.add("args."+name, "not an argument of %s, which takes none", d.Op)
			} else {
				ps.add("args."+name, "not an argument of %s, which takes %s", d.Op, strings.Join(takes, ", "))
			}
		}
	}
	a := d.Args
	switch d.Op {
	case weft.BatchSignal:
		if !given("args.event") {
			ps.add("args.event", "is required: the event to send")
		} else if err := definition.CheckEventName(a.Event); err != nil {
			ps.add("args.event", "%v", err)
		}
		if given("args.key") && a.Key == "" {
			ps.add("args.key", "is empty: leave it out to signal every wait for the event, whatever its key")
		}
		if given("args.payload") && !json.Valid(a.Payload) {
			ps.add("args.payload", "is not a JSON value")
		}
	case weft.BatchMigrate:
		if given("args.to_version") && a.ToVersion < 1 {
			ps.add("args.to_version", "%d is not a version, at least 1 (leave it out for the workflow's latest)", a.ToVersion)
		}
		for _, name := range slices.Sorted(maps.Keys(a.Plugins)) {
			path := "args.plugins." + name
			if !abi.ValidName(name) {
				ps.add(path, "%q is not a plugin name: 1 to %d characters from [a-z0-9_-], starting with a letter", name, abi.MaxNameLen)
			}
			if v := a.Plugins[name]; !isVersion(v) {
				ps.add(path, "%q is not a plugin version: want its sha256, 64 lowercase hex digits", v)
			}
		}
		if a.Retry && a.Resume {
			ps.add("args.resume", "retry and resume are both set: a migrated instance is retried (it had failed) or resumed (it was paused); choose one")
		}
	case weft.BatchReset:
		if !given("args.step") {
			ps.add("args.step", "is required: the step to run each instance again from")
		} else if !abi.ValidName(a.Step) {
			ps.add("args.step", "invalid step id %q: want 1 to %d characters from [a-z0-9_-], starting with a letter", a.Step, abi.MaxNameLen)
		}
	}
}

// checkIDs adds the problems of an id list: its length, each id, and ids
// given twice (named by their indexes).
func (d *Document) checkIDs(ps *problems) {
	switch n := len(d.IDs); {
	case n == 0:
		ps.add("ids", "is empty: want at least one instance id")
	case n > weft.MaxBatchIDs:
		ps.add("ids", "holds %d ids, more than %d: select them with a query, or start several batches", n, weft.MaxBatchIDs)
		return
	}
	first := make(map[string]int, len(d.IDs))
	for i, id := range d.IDs {
		if err := weft.CheckID("the id", id); err != nil {
			ps.add(fmt.Sprintf("ids[%d]", i), "%s", strings.TrimPrefix(err.Error(), weft.ErrInvalid.Error()+": "))
			continue
		}
		if j, seen := first[id]; seen {
			ps.add(fmt.Sprintf("ids[%d]", i), "%q is also ids[%d]: give each instance once", id, j)
			continue
		}
		first[id] = i
	}
}

// opList is the operations, for a message.
func opList() string {
	ops := weft.BatchOps()
	s := make([]string, len(ops))
	for i, op := range ops {
		s[i] = string(op)
	}
	return strings.Join(s, ", ")
}

// isVersion reports whether v is a plugin version: the sha256 of its
// module, as 64 lowercase hex digits.
func isVersion(v string) bool {
	if len(v) != 64 {
		return false
	}
	for i := range len(v) {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ancestors lists the paths that path is inside, nearest first:
// args.plugins.pay is inside args.plugins and args, ids[3] inside ids. The
// whole document ("") is left out: a problem of the whole is not one of
// its fields.
func ancestors(path string) []string {
	var out []string
	for i := len(path) - 1; i > 0; i-- {
		if path[i] == '.' || path[i] == '[' {
			out = append(out, path[:i])
		}
	}
	return out
}

// parser reads a document's JSON and collects the problems of its shape:
// unknown fields, fields given twice, values of the wrong type.
type parser struct {
	errs problems
}

func (p *parser) add(path, format string, args ...any) { p.errs.add(path, format, args...) }

// document reads the fields of a document, and which were given (by
// path: query, rate, args.event); nil when raw is not an object.
func (p *parser) document(raw json.RawMessage) (*Document, map[string]bool) {
	f := p.object(raw, "", docFields())
	if f == nil {
		return nil, nil
	}
	d := &Document{}
	given := map[string]bool{}
	for k := range f {
		given[k] = true
	}
	if v := f["op"]; v != nil {
		s, _ := p.str(v, "op")
		d.Op = weft.BatchOp(s)
	}
	if v := f["query"]; v != nil {
		d.Query, _ = p.str(v, "query")
	}
	if v := f["ids"]; v != nil {
		d.IDs = p.ids(v)
	}
	if v := f["reason"]; v != nil {
		d.Reason, _ = p.str(v, "reason")
	}
	if v := f["rate"]; v != nil {
		var r float64
		switch {
		case !isNumber(v):
			p.add("rate", "want a number of instances per second (0: no limit), not %s", show(v))
		case json.Unmarshal(v, &r) != nil:
			p.add("rate", "%s is too large a number", show(v))
		default:
			d.Rate = &r
		}
	}
	if v := f["hold"]; v != nil {
		d.Hold = p.boolean(v, "hold")
	}
	if v := f["dry_run"]; v != nil {
		d.DryRun = p.boolean(v, "dry_run")
	}
	if v := f["args"]; v != nil {
		p.args(v, d, given)
	}
	return d, given
}

// args reads a document's args into d, noting which were given.
func (p *parser) args(raw json.RawMessage, d *Document, given map[string]bool) {
	f := p.object(raw, "args", argsFields())
	if f == nil {
		return
	}
	for k := range f {
		given["args."+k] = true
	}
	a := &d.Args
	if v := f["event"]; v != nil {
		a.Event, _ = p.str(v, "args.event")
	}
	if v := f["key"]; v != nil {
		a.Key, _ = p.str(v, "args.key")
	}
	if v := f["payload"]; v != nil {
		b, err := normalPayload(v)
		if err != nil {
			p.add("args.payload", "not JSON: %s", jsonError(err))
		}
		a.Payload = b
	}
	if v := f["to_version"]; v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil {
			p.add("args.to_version", "want a whole number, the workflow version to move to, not %s", show(v))
		}
		a.ToVersion = n
	}
	if v := f["plugins"]; v != nil {
		if m := p.object(v, "args.plugins", nil); m != nil {
			a.Plugins = make(map[string]string, len(m))
			for name, ver := range m {
				if s, ok := p.str(ver, "args.plugins."+name); ok {
					a.Plugins[name] = s
				}
			}
		}
	}
	if v := f["retry"]; v != nil {
		a.Retry = p.boolean(v, "args.retry")
	}
	if v := f["resume"]; v != nil {
		a.Resume = p.boolean(v, "args.resume")
	}
	if v := f["step"]; v != nil {
		a.Step, _ = p.str(v, "args.step")
	}
}

// object reads the members of a JSON object, refusing another kind of
// value, a key given twice and, when known is not nil, a key not in it.
// A member whose value is null is left out. Nil when raw is not an
// object.
func (p *parser) object(raw json.RawMessage, path string, known []string) map[string]json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		if path == "" {
			p.add(path, "want a JSON object, not %s", show(raw))
		} else {
			p.add(path, "want an object, not %s", show(raw))
		}
		return nil
	}
	out := map[string]json.RawMessage{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			p.add(path, "not JSON: %s", jsonError(err))
			return nil
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			p.add(path, "not JSON: %s", jsonError(err))
			return nil
		}
		at := join(path, key)
		switch {
		case known != nil && !slices.Contains(known, key):
			p.add(at, "unknown field; the fields here are %s", strings.Join(known, ", "))
		case seen[key]:
			p.add(at, "appears twice")
		default:
			seen[key] = true
			if string(v) != "null" {
				out[key] = v
			}
		}
	}
	return out
}

// ids reads a list of strings.
func (p *parser) ids(raw json.RawMessage) []string {
	var ids []string
	if raw[0] == '[' && json.Unmarshal(raw, &ids) == nil && !slices.Contains(ids, "") {
		return ids // every item a string (none null, which would read as "")
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		p.add("ids", "want a list of instance ids, not %s", show(raw))
		return nil
	}
	ids = make([]string, len(items))
	for i, it := range items {
		ids[i], _ = p.str(it, fmt.Sprintf("ids[%d]", i))
	}
	return ids
}

// str reads a JSON string.
func (p *parser) str(raw json.RawMessage, path string) (string, bool) {
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		p.add(path, "want a string, not %s", show(raw))
		return "", false
	}
	return s, true
}

// boolean reads true or false.
func (p *parser) boolean(raw json.RawMessage, path string) bool {
	switch string(raw) {
	case "true":
		return true
	case "false":
		return false
	}
	p.add(path, "want true or false, not %s", show(raw))
	return false
}

// isNumber reports whether raw is a JSON number.
func isNumber(raw json.RawMessage) bool {
	return raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'
}

// show is a JSON value as a message quotes it: cut when long.
func show(raw json.RawMessage) string {
	const max = 40
	if len(raw) <= max {
		return string(raw)
	}
	n := max
	for n > 0 && !utf8.RuneStart(raw[n]) {
		n--
	}
	return string(raw[:n]) + "…"
}

// jsonError is a decoding error as a message says it, with its byte
// offset when it has one.
func jsonError(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "it ends too early"
	}
	return err.Error()
}

// normalPayload is a payload in its one form: compact, object keys
// sorted, numbers as written; nil with the error when it is not one JSON
// value.
func normalPayload(raw json.RawMessage) (json.RawMessage, error) {
	if !json.Valid(raw) {
		return nil, errors.New("not one JSON value")
	}
	var x any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return jsonv.Marshal(x)
}

// join is the path of key under path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Canonical is the document as JSON with its fields in a fixed order (op,
// query or ids, reason, rate, hold, dry_run, args) and its values as the
// host reads them — the query in its canonical form, the rate always
// written (Limit), the payload compact with sorted keys — the form the
// store keeps (weft.Batch.Document): two documents that mean the same
// thing have the same canonical form, which ParseDocument reads back to
// itself. Of a document that Validate refuses, it writes what it can: a
// rate that is not a number, or a payload that is not JSON, is left out.
func (d *Document) Canonical() []byte {
	type args struct {
		Event     string            `json:"event,omitempty"`
		Key       string            `json:"key,omitempty"`
		Payload   json.RawMessage   `json:"payload,omitempty"`
		ToVersion int               `json:"to_version,omitempty"`
		Plugins   map[string]string `json:"plugins,omitempty"`
		Retry     bool              `json:"retry,omitempty"`
		Resume    bool              `json:"resume,omitempty"`
		Step      string            `json:"step,omitempty"`
	}
	doc := struct {
		Op     weft.BatchOp `json:"op"`
		Query  string       `json:"query,omitempty"`
		IDs    []string     `json:"ids,omitempty"`
		Reason string       `json:"reason,omitempty"`
		Rate   *float64     `json:"rate,omitempty"`
		Hold   bool         `json:"hold,omitempty"`
		DryRun bool         `json:"dry_run,omitempty"`
		Args   *args        `json:"args,omitempty"`
	}{Op: d.Op, Query: d.Query, IDs: d.IDs, Reason: d.Reason, Hold: d.Hold, DryRun: d.DryRun}
	if q, err := query.Parse(d.Query); err == nil {
		doc.Query = q.String()
	}
	if r := d.Limit(); !math.IsNaN(r) && !math.IsInf(r, 0) {
		doc.Rate = &r
	}
	a := args{Event: d.Args.Event, Key: d.Args.Key, ToVersion: d.Args.ToVersion, Plugins: d.Args.Plugins,
		Retry: d.Args.Retry, Resume: d.Args.Resume, Step: d.Args.Step}
	if d.Args.Payload != nil {
		a.Payload, _ = normalPayload(d.Args.Payload)
	}
	if a.Event != "" || a.Key != "" || a.Payload != nil || a.ToVersion != 0 || len(a.Plugins) > 0 || a.Retry || a.Resume || a.Step != "" {
		doc.Args = &a
	}
	b, err := jsonv.Marshal(doc)
	if err != nil {
		// Every value above is one JSON can hold: a string, a finite
		// number, a bool, a compacted valid JSON value.
		panic(fmt.Sprintf("batch: the canonical form of a document: %v", err))
	}
	return b
}
