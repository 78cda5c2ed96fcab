package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
)

// MaxNodes bounds the number of YAML nodes a definition may hold once its
// aliases are expanded, so that a small document cannot expand into a huge
// one ("billion laughs").
const MaxNodes = 100_000

// Parse parses a definition written in YAML or JSON (JSON is YAML) and
// checks everything that does not need a Catalog: the document's structure,
// field names and types, step kinds, durations, expressions, names and the
// ranges of values. On failure it returns a *weft.DefinitionError (matching
// weft.ErrInvalidDefinition) listing every problem with its path.
func Parse(data []byte) (*Definition, error) {
	return Load(data, nil)
}

// Load is Parse followed by the checks against catalog, reporting the problems
// of both in one *weft.DefinitionError, in document order. A nil catalog skips the
// checks that need one.
func Load(data []byte, catalog Catalog) (*Definition, error) {
	return load(data, catalog, false)
}

// ParseSaved parses a definition that the host saved earlier, as Parse
// does, except that it accepts what an earlier save accepted and Parse now
// refuses: duplicate mapping keys, the last of which wins. The engine
// reads stored versions with it, so that the instances of a version saved
// before a rule was added keep running; anything new goes through Parse
// or Load.
func ParseSaved(data []byte) (*Definition, error) {
	return load(data, nil, true)
}

func load(data []byte, catalog Catalog, saved bool) (*Definition, error) {
	d := decoder{pos: map[string]pos{}, saved: saved}
	def := d.document(data)
	problems := d.problems
	if def != nil {
		// A field that failed to decode was left zero; do not report it again.
		bad := map[string]bool{}
		for _, p := range d.problems {
			bad[p.Path] = true
		}
		for _, p := range validate(def, catalog) {
			if !bad[p.Path] {
				problems = append(problems, p)
			}
		}
	}
	problems = d.finish(problems)
	if len(problems) > 0 {
		e := &weft.DefinitionError{Problems: problems}
		if def != nil {
			e.Name = def.Name
		}
		return nil, e
	}
	return def, nil
}

type pos struct{ line, column int }

type decoder struct {
	problems []weft.Problem
	pos      map[string]pos // where each path is, to locate problems
	nodes    int            // nodes visited, against MaxNodes
	tooBig   bool
	// saved tolerates duplicate keys, letting the last win (ParseSaved).
	saved bool
}

// finish locates the problems, drops duplicates and sorts them in document
// order.
func (d *decoder) finish(ps []weft.Problem) []weft.Problem {
	seen := map[weft.Problem]bool{}
	out := ps[:0:0]
	for _, p := range ps {
		if p.Line == 0 {
			for path := p.Path; ; path = parentPath(path) {
				if at, ok := d.pos[path]; ok {
					p.Line, p.Column = at.line, at.column
					break
				}
				if path == RootPath {
					break
				}
			}
		}
		key := weft.Problem{Path: p.Path, Message: p.Message}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Column < out[j].Column
	})
	return out
}

// parentPath strips the last segment of a path: steps[1].then[0] →
// steps[1].then → steps[1] → steps → RootPath.
func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i > 0 {
		return p[:i]
	}
	return RootPath
}

func (d *decoder) problem(n *yaml.Node, path, format string, args ...any) {
	p := weft.Problem{Path: path, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Line, p.Column = n.Line, n.Column
	}
	d.problems = append(d.problems, p)
}

var lineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// document decodes data; it returns nil when the text is not a document.
func (d *decoder) document(data []byte) *Definition {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.problem(nil, RootPath, "empty document")
			return nil
		}
		d.syntax(data, err)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.problem(&extra, RootPath, "more than one YAML document; want one definition")
		return nil
	} else if !errors.Is(err, io.EOF) {
		d.syntax(data, err)
		return nil
	}
	if len(doc.Content) == 0 {
		d.problem(nil, RootPath, "empty document")
		return nil
	}
	d.pos[RootPath] = pos{doc.Content[0].Line, doc.Content[0].Column}
	return d.definition(doc.Content[0])
}

// syntax reports a syntax error as one problem. JSON text is located by
// encoding/json, which knows the column; yaml.v3 only knows the line.
func (d *decoder) syntax(data []byte, err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := weft.Problem{Path: RootPath}
	if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		msg = strings.TrimPrefix(err.Error(), m[0])
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		var v any
		var se *json.SyntaxError
		if jerr := json.Unmarshal(data, &v); errors.As(jerr, &se) {
			p.Line, p.Column = lineColumn(data, se.Offset)
			msg = se.Error()
		}
	}
	p.Message = "syntax error: " + msg
	d.problems = append(d.problems, p)
}

func lineColumn(data []byte, offset int64) (line, column int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	column = int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
	if column < 1 {
		column = 1
	}
	return line, column
}

// resolve follows aliases and counts nodes against MaxNodes. It returns nil,
// after reporting once, when the document is too large.
func (d *decoder) resolve(n *yaml.Node, path string) *yaml.Node {
	for depth := 0; n != nil && n.Kind == yaml.AliasNode; depth++ {
		if depth > 100 {
			d.problem(n, path, "alias chain too deep")
			return nil
		}
		n = n.Alias
	}
	d.nodes++
	if d.nodes > MaxNodes {
		if !d.tooBig {
			d.tooBig = true
			d.problem(n, RootPath, "document too large: more than %d nodes once aliases are expanded", MaxNodes)
		}
		return nil
	}
	if n != nil {
		if _, ok := d.pos[path]; !ok {
			d.pos[path] = pos{n.Line, n.Column}
		}
	}
	return n
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		}
		return "a " + strings.TrimPrefix(n.ShortTag(), "!!")
	}
	return "nothing"
}

// field is one key of a mapping.
type field struct {
	key, val *yaml.Node
	path     string
}

// fields returns a mapping's fields in order, reporting non-string keys,
// merge keys and duplicate keys. It returns nil, ok=false when n is not a
// mapping.
//
// yaml.v3 refuses a duplicate key when it decodes into a map or a struct,
// not into the yaml.Node the parser reads, and encoding/json never does
// (JSON text is read as YAML here too): the check is the parser's. The
// first occurrence is kept and each later one is a problem at it, naming
// the first.
func (d *decoder) fields(n *yaml.Node, path, what string) (map[string]field, []string, bool) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "got %s, want %s", describe(n), what)
		return nil, nil, false
	}
	fs := map[string]field{}
	var order []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := d.resolve(n.Content[i], path)
		if k == nil {
			return nil, nil, false
		}
		if k.Kind != yaml.ScalarNode || (k.ShortTag() != "!!str" && k.ShortTag() != "!!merge") {
			d.problem(k, path, "got %s as a key, want a string", describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.problem(k, path, "merge keys (<<) are not supported")
			continue
		}
		fp := joinKey(path, k.Value)
		if first, dup := fs[k.Value]; dup && !d.saved {
			d.problem(k, fp, "duplicate key %q: it is already at line %d, column %d of this map", k.Value, first.key.Line, first.key.Column)
			continue
		}
		v := d.resolve(n.Content[i+1], fp)
		if v == nil {
			return nil, nil, false
		}
		d.pos[fp] = pos{v.Line, v.Column}
		fs[k.Value] = field{key: k, val: v, path: fp}
		order = append(order, k.Value)
	}
	return fs, order, true
}

// unknown reports the fields of fs not in allowed, suggesting the allowed
// one a field is likely a typo of.
func (d *decoder) unknown(fs map[string]field, order []string, allowed ...string) {
	for _, k := range order {
		if !contains(allowed, k) {
			d.problem(fs[k].key, fs[k].path, "unknown field %q%s", k, didYouMean(k, allowed))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (d *decoder) str(f field) (string, bool) {
	if f.val.Kind != yaml.ScalarNode || f.val.ShortTag() != "!!str" {
		d.problem(f.val, f.path, "got %s, want a string", describe(f.val))
		return "", false
	}
	return f.val.Value, true
}

func (d *decoder) integer(f field) (int, bool) {
	if f.val.Kind == yaml.ScalarNode && f.val.ShortTag() == "!!int" {
		var i int
		if err := f.val.Decode(&i); err == nil {
			return i, true
		}
		d.problem(f.val, f.path, "integer %s is out of range", f.val.Value)
		return 0, false
	}
	d.problem(f.val, f.path, "got %s, want an integer", describe(f.val))
	return 0, false
}

func (d *decoder) number(f field) (float64, bool) {
	if f.val.Kind == yaml.ScalarNode && (f.val.ShortTag() == "!!int" || f.val.ShortTag() == "!!float") {
		var x float64
		if err := f.val.Decode(&x); err == nil && !math.IsInf(x, 0) && !math.IsNaN(x) {
			return x, true
		}
		d.problem(f.val, f.path, "number %s is not finite", f.val.Value)
		return 0, false
	}
	d.problem(f.val, f.path, "got %s, want a number", describe(f.val))
	return 0, false
}

func (d *decoder) boolean(f field) (bool, bool) {
	if f.val.Kind == yaml.ScalarNode && f.val.ShortTag() == "!!bool" {
		var b bool
		if err := f.val.Decode(&b); err == nil {
			return b, true
		}
	}
	d.problem(f.val, f.path, "got %s, want true or false", describe(f.val))
	return false, false
}

func (d *decoder) duration(f field) (time.Duration, bool) {
	if f.val.Kind != yaml.ScalarNode || f.val.ShortTag() != "!!str" {
		d.problem(f.val, f.path, "got %s, want a duration such as 500ms, 30s, 72h or 7d", describe(f.val))
		return 0, false
	}
	dur, err := ParseDuration(f.val.Value)
	if err != nil {
		d.problem(f.val, f.path, "%v", err)
		return 0, false
	}
	return dur, true
}

// plain converts a node into a JSON-like Go value: nil, bool, int,
// float64, string, []any or map[string]any.
func (d *decoder) plain(n *yaml.Node, path string) (any, bool) {
	n = d.resolve(n, path)
	if n == nil {
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		fs, order, ok := d.fields(n, path, "a map")
		if !ok {
			return nil, false
		}
		m := make(map[string]any, len(order))
		for _, k := range order {
			v, ok2 := d.plain(fs[k].val, fs[k].path)
			ok = ok && ok2
			m[k] = v
		}
		return m, ok && len(order)*2 == len(n.Content)
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, ok2 := d.plain(c, joinIndex(path, i))
			ok = ok && ok2
			l[i] = v
		}
		return l, ok
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, true
		case "!!bool":
			var b bool
			err := n.Decode(&b)
			return b, err == nil
		case "!!int":
			var i int
			if err := n.Decode(&i); err == nil {
				return i, true
			}
			var f float64
			if err := n.Decode(&f); err == nil && !math.IsInf(f, 0) {
				return f, true
			}
			d.problem(n, path, "integer %s is out of range", n.Value)
			return nil, false
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				d.problem(n, path, "number %s is not finite; JSON has no such number", n.Value)
				return nil, false
			}
			return f, true
		case "!!str", "!!timestamp", "!!binary":
			return n.Value, true
		}
		d.problem(n, path, "unsupported YAML tag %s", n.Tag)
		return nil, false
	}
	d.problem(n, path, "unsupported YAML node")
	return nil, false
}

// value decodes and compiles a value with the loop variables of scope.
func (d *decoder) value(f field, scope []string, w want) Value {
	return d.compiled(f, compiler{scope: scope}, w)
}

// compiled decodes a value and compiles it with c, reporting c's
// problems.
func (d *decoder) compiled(f field, c compiler, w want) Value {
	src, ok := d.plain(f.val, f.path)
	if !ok {
		return Value{}
	}
	v := c.value(src, f.path, w)
	for _, p := range c.problems {
		d.problem(nil, p.Path, "%s", p.Message)
	}
	return v
}

func (d *decoder) definition(n *yaml.Node) *Definition {
	n = d.resolve(n, RootPath)
	if n == nil {
		return nil
	}
	fs, order, ok := d.fields(n, RootPath, "a workflow definition (a map)")
	if !ok {
		return nil
	}
	d.unknown(fs, order, "name", "persistence", "triggers", "steps", "output", "retention", "priority", "fairness", "concurrency", "search", "record")
	def := &Definition{Persistence: PersistenceLazy}
	if f, ok := fs["name"]; ok {
		def.Name, _ = d.str(f)
	}
	if f, ok := fs["persistence"]; ok {
		if s, ok := d.str(f); ok {
			def.Persistence = Persistence(s)
		}
	}
	if f, ok := fs["triggers"]; ok {
		if f.val.Kind != yaml.SequenceNode {
			d.problem(f.val, f.path, "got %s, want a list of triggers", describe(f.val))
		} else {
			for i, c := range f.val.Content {
				p := joinIndex(f.path, i)
				c = d.resolve(c, p)
				if c == nil {
					return def
				}
				var t Trigger
				if tfs, order, ok := d.fields(c, p, "a trigger (a map with an event)"); ok {
					d.unknown(tfs, order, "event")
					if ef, ok := tfs["event"]; ok {
						t.Event, _ = d.str(ef)
					}
				}
				def.Triggers = append(def.Triggers, t)
			}
		}
	}
	if f, ok := fs["steps"]; ok {
		def.Steps = d.steps(f, nil)
	}
	if f, ok := fs["output"]; ok {
		def.Output = d.value(f, nil, wantAny)
	}
	if f, ok := fs["retention"]; ok {
		// A bare 0 is allowed, unlike other bare numbers: "keep forever"
		// has no unit to guess.
		if f.val.Kind == yaml.ScalarNode && f.val.ShortTag() == "!!int" && f.val.Value == "0" {
			def.Retention = new(time.Duration)
		} else if r, ok := d.duration(f); ok {
			def.Retention = &r
		}
	}
	if f, ok := fs["priority"]; ok {
		def.Priority = d.orderInt(f, weft.HighestPriority, weft.LowestPriority)
	}
	if f, ok := fs["fairness"]; ok {
		def.Fairness = d.fairness(f)
	}
	if f, ok := fs["concurrency"]; ok {
		def.Concurrency = d.concurrency(f)
	}
	if f, ok := fs["search"]; ok {
		def.Search = d.search(f)
	}
	if f, ok := fs["record"]; ok {
		def.Record = d.record(f)
	}
	return def
}

// record decodes a record policy: off, failed, all or a percentage such
// as 5% (weft.ParseRecordPolicy). A bare number is refused with the
// percentage it likely means.
func (d *decoder) record(f field) weft.RecordPolicy {
	const want = "off, failed, all or a percentage of attempts such as 5%"
	switch {
	case f.val.Kind == yaml.ScalarNode && (f.val.ShortTag() == "!!int" || f.val.ShortTag() == "!!float"):
		x, ok := d.number(f)
		if !ok {
			return weft.RecordPolicy{}
		}
		d.problem(f.val, f.path, "got a number, want %s (write %s%% for a share of %s)", want,
			strconv.FormatFloat(x*100, 'g', -1, 64), f.val.Value)
		return weft.RecordPolicy{}
	case f.val.Kind != yaml.ScalarNode || f.val.ShortTag() != "!!str":
		d.problem(f.val, f.path, "got %s, want %s", describe(f.val), want)
		return weft.RecordPolicy{}
	}
	p, err := weft.ParseRecordPolicy(f.val.Value)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), weft.ErrInvalid.Error()+": ")
		d.problem(f.val, f.path, "%s", msg)
		return weft.RecordPolicy{}
	}
	return p
}

// orderValue decodes and compiles a value that is decided when an
// instance is created — where it goes in the ready queue, its
// concurrency key — so it sees input only.
func (d *decoder) orderValue(f field, w want) Value {
	return d.compiled(f, compiler{inputOnly: true}, w)
}

// orderInt decodes a priority or a weight: an integer literal, whose
// range [lo, hi] validate checks, or a ${ } expression over input.
func (d *decoder) orderInt(f field, lo, hi int) Value {
	switch {
	case hasExpr(f.val):
		return d.orderValue(f, wantInt)
	case f.val.Kind == yaml.ScalarNode && f.val.ShortTag() == "!!int":
		if _, ok := d.integer(f); !ok {
			return Value{}
		}
		return d.orderValue(f, wantInt)
	}
	d.problem(f.val, f.path, "got %s, want an integer from %d to %d or a ${ } expression", describe(f.val), lo, hi)
	return Value{}
}

// fairness decodes a workflow's fairness: a map with a key and an
// optional weight.
func (d *decoder) fairness(f field) *Fairness {
	ffs, order, ok := d.fields(f.val, f.path, "a map with a key and an optional weight")
	if !ok {
		return nil
	}
	d.unknown(ffs, order, "key", "weight")
	fa := &Fairness{}
	if kf, ok := ffs["key"]; ok {
		fa.Key = d.key(kf)
	} else {
		// A misspelt key is one problem, with its suggestion, not also a
		// missing key.
		for _, k := range order {
			fa.keyReported = fa.keyReported || closest(k, []string{"key", "weight"}) == "key"
		}
	}
	if wf, ok := ffs["weight"]; ok {
		fa.Weight = d.orderInt(wf, 1, weft.MaxFairnessWeight)
	}
	return fa
}

// concurrency decodes a workflow's concurrency: a map with a limit, an
// optional key and an optional policy. The limit is a literal, whose
// range validate checks; the policy is kept as written, for validate to
// read (slots.ParsePolicy).
func (d *decoder) concurrency(f field) *Concurrency {
	cfs, order, ok := d.fields(f.val, f.path, "a map with a limit, an optional key and an optional policy")
	if !ok {
		return nil
	}
	fields := []string{"key", "limit", "policy"}
	d.unknown(cfs, order, fields...)
	c := &Concurrency{Policy: slots.Queue}
	if kf, ok := cfs["key"]; ok {
		c.Key = d.key(kf)
	}
	c.Limit, c.limitReported = d.literalInt(f, cfs, order, fields, intField{
		name:     "limit",
		max:      MaxConcurrencyLimit,
		required: "how many instances of one key may run at once",
		same:     "a limit is a literal, the same for every instance",
	})
	if pf, ok := cfs["policy"]; ok {
		if p, ok := d.str(pf); ok && p != "" {
			c.Policy = slots.Policy(p)
		}
	}
	return c
}

// intField describes an integer field that must be a literal: a limit, a
// burst.
type intField struct {
	name string // the field's name
	max  int    // its largest value, which problems name; the least is 1
	// required says what the field is, when it is required; "" when it
	// may be absent.
	required string
	// same says why an expression is refused: the value is the same for
	// every instance (every attempt).
	same string
}

// literalInt decodes the field li names from fs, the fields (in order) of
// the map parent: an integer literal, whose range validate checks. It
// returns the integer and whether a problem was reported, so that
// validate does not report the field again. An absent required field is
// reported, unless one of the map's unknown fields is likely it
// misspelt: that is one problem, with its suggestion, already reported.
func (d *decoder) literalInt(parent field, fs map[string]field, order, fields []string, li intField) (int, bool) {
	f, ok := fs[li.name]
	switch {
	case !ok:
		if li.required == "" {
			return 0, false
		}
		if !misspelt(order, fields, li.name) {
			d.problem(parent.val, joinKey(parent.path, li.name), "required: %s, from 1 to %d", li.required, li.max)
		}
		return 0, true
	case f.val.Kind == yaml.ScalarNode && f.val.ShortTag() == "!!int":
		n, ok := d.integer(f)
		return n, !ok
	case hasExpr(f.val):
		d.problem(f.val, f.path, "got an expression, want an integer from 1 to %d: %s", li.max, li.same)
	default:
		d.problem(f.val, f.path, "got %s, want an integer from 1 to %d", describe(f.val), li.max)
	}
	return 0, true
}

// misspelt reports whether one of a map's keys (order), not among its
// fields, is likely name misspelt: the parser reported it, with its
// suggestion, and a missing name would be the same problem again.
func misspelt(order, fields []string, name string) bool {
	for _, k := range order {
		if !contains(fields, k) && closest(k, fields) == name {
			return true
		}
	}
	return false
}

// key decodes a key that is decided when an instance is created, a
// fairness key or a concurrency key: a string literal or a ${ }
// expression or template over input.
func (d *decoder) key(f field) Value {
	return d.keyIn(f, compiler{inputOnly: true})
}

// keyIn decodes a key, compiling it with c: a string literal or a ${ }
// expression or template over the names c has in scope.
func (d *decoder) keyIn(f field, c compiler) Value {
	if f.val.Kind != yaml.ScalarNode || (f.val.ShortTag() != "!!str" && f.val.ShortTag() != "!!timestamp") {
		// A literal is a string: the key of an unquoted 007 or 1e3 would
		// be a guess (7? 1000?), so numbers and booleans are refused.
		d.problem(f.val, f.path, "got %s, want a string or a ${ } expression (quote a number to use it as a key)", describe(f.val))
		return Value{}
	}
	return d.compiled(f, c, wantKey)
}

// steps decodes a list of steps. A list item that is not a step leaves a nil
// in its place so that the paths of the others stay right.
func (d *decoder) steps(f field, scope []string) []*Step {
	if f.val.Kind != yaml.SequenceNode {
		d.problem(f.val, f.path, "got %s, want a list of steps", describe(f.val))
		return nil
	}
	steps := make([]*Step, len(f.val.Content))
	for i, c := range f.val.Content {
		p := joinIndex(f.path, i)
		c = d.resolve(c, p)
		if c == nil {
			return steps
		}
		steps[i] = d.step(c, p, scope)
	}
	return steps
}

// Fields allowed on a step besides its kind, by kind.
var (
	commonFields = []string{"id", "persist"}
	kindFields   = map[Kind][]string{
		KindActivity: {"input", "output", "timeout", "schedule_to_close", "heartbeat_timeout", "retry", "concurrency", "rate_limit", "record"},
		KindWait:     {"output"},
		KindIf:       {"then", "else"},
		KindForeach:  {"as", "concurrency", "do"},
		KindWorkflow: {"input", "output"},
	}
)

func kindNames() string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func (d *decoder) step(n *yaml.Node, path string, scope []string) *Step {
	fs, order, ok := d.fields(n, path, "a step (a map)")
	if !ok {
		return nil
	}
	s := &Step{}
	var found []string
	for _, k := range order {
		if contains(kindStrings(), k) {
			found = append(found, k)
		}
	}
	if len(found) > 1 {
		d.problem(n, path, "step has %d kinds (%s); want exactly one", len(found), strings.Join(found, ", "))
	}
	if len(found) > 0 {
		s.Kind = Kind(found[0])
	}
	allowed := append([]string{}, commonFields...)
	allowed = append(allowed, kindFields[s.Kind]...)
	// A step without a kind but with an unknown field has, as a rule, a
	// misspelt kind: that one problem is reported, not its consequences
	// (no kind; fields that need one).
	if len(found) == 0 {
		for _, k := range order {
			if !contains(allowed, k) && !isStepField(k) {
				s.kindReported = true
			}
		}
	}
	for _, k := range order {
		f := fs[k]
		switch {
		case contains(allowed, k) || contains(found, k):
		case isStepField(k):
			if s.kindReported {
				continue
			}
			if s.Kind == "" {
				d.problem(f.key, f.path, "field %q needs a step kind that takes it", k)
			} else {
				d.problem(f.key, f.path, "field %q does not apply to %s steps", k, s.Kind)
			}
		case len(found) == 0:
			if hint := didYouMean(k, kindStrings()); hint != "" {
				d.problem(f.key, f.path, "unknown step kind or field %q%s", k, hint)
			} else {
				d.problem(f.key, f.path, "unknown step kind or field %q; step kinds are %s", k, kindNames())
			}
		default:
			d.problem(f.key, f.path, "unknown field %q%s", k, didYouMean(k, allowed))
		}
	}
	if f, ok := fs["id"]; ok {
		s.ID, _ = d.str(f)
	}
	if f, ok := fs["persist"]; ok {
		if p, ok := d.str(f); ok {
			s.Persist = Persist(p)
		}
	}
	if f, ok := fs["output"]; ok && contains(allowed, "output") {
		s.Output, _ = d.str(f)
	}
	f := fs[string(s.Kind)]
	switch s.Kind {
	case KindActivity:
		s.Activity = d.activity(f, fs, scope)
	case KindWait:
		s.Wait = d.wait(f, scope)
	case KindDelay:
		d.delay(s, f, scope)
	case KindIf:
		s.If = &If{Cond: d.value(f, scope, wantBool)}
		if f, ok := fs["then"]; ok {
			s.If.Then = d.steps(f, scope)
		}
		if f, ok := fs["else"]; ok {
			s.If.Else = d.steps(f, scope)
		}
	case KindForeach:
		s.Foreach = &Foreach{Items: d.value(f, scope, wantList), Concurrency: 1}
		if f, ok := fs["as"]; ok {
			s.Foreach.As, _ = d.str(f)
		}
		if f, ok := fs["concurrency"]; ok {
			s.Foreach.Concurrency, _ = d.integer(f)
		}
		if f, ok := fs["do"]; ok {
			inner := scope
			if s.Foreach.As != "" {
				inner = append(append([]string{}, scope...), s.Foreach.As)
			}
			s.Foreach.Do = d.steps(f, inner)
		}
	case KindParallel:
		s.Parallel = d.parallel(f, scope)
	case KindWorkflow:
		s.Workflow = &ChildWorkflow{}
		s.Workflow.Name, _ = d.str(f)
		if f, ok := fs["input"]; ok {
			s.Workflow.Input = d.value(f, scope, wantAny)
		}
	case KindSet:
		s.Set = []Assignment{}
		if sfs, order, ok := d.fields(f.val, f.path, "a map of variable names to values"); ok {
			sort.Strings(order)
			for _, k := range order {
				s.Set = append(s.Set, Assignment{Name: k, Value: d.value(sfs[k], scope, wantAny)})
			}
		}
	case KindFail:
		s.Fail = &Fail{}
		if ffs, order, ok := d.fields(f.val, f.path, "a map with a code and a message"); ok {
			d.unknown(ffs, order, "code", "message")
			if cf, ok := ffs["code"]; ok {
				s.Fail.Code, _ = d.str(cf)
			}
			if mf, ok := ffs["message"]; ok {
				if _, ok := d.str(mf); ok {
					s.Fail.Message = d.value(mf, scope, wantAny)
				}
			}
		}
	}
	return s
}

func kindStrings() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = string(k)
	}
	return out
}

func isStepField(k string) bool {
	for _, fs := range kindFields {
		if contains(fs, k) {
			return true
		}
	}
	return false
}

func (d *decoder) activity(f field, fs map[string]field, scope []string) *Activity {
	a := &Activity{Retry: DefaultRetry()}
	if name, ok := d.str(f); ok {
		a.Plugin, a.Name, _ = strings.Cut(name, ".")
	}
	if f, ok := fs["input"]; ok {
		a.Input = d.value(f, scope, wantAny)
	}
	if f, ok := fs["timeout"]; ok {
		a.Timeout, _ = d.duration(f)
	}
	if f, ok := fs["schedule_to_close"]; ok {
		a.ScheduleToClose, _ = d.duration(f)
	}
	if f, ok := fs["heartbeat_timeout"]; ok {
		a.HeartbeatTimeout, _ = d.duration(f)
	}
	if f, ok := fs["retry"]; ok {
		a.Retry = d.retry(f)
	}
	if f, ok := fs["concurrency"]; ok {
		a.Concurrency = d.stepConcurrency(f, scope)
	}
	if f, ok := fs["rate_limit"]; ok {
		a.RateLimit = d.stepRateLimit(f, scope)
	}
	if f, ok := fs["record"]; ok {
		a.Record = d.record(f)
	}
	return a
}

func (d *decoder) retry(f field) Retry {
	r := DefaultRetry()
	rfs, order, ok := d.fields(f.val, f.path, "a retry policy (a map)")
	if !ok {
		return r
	}
	d.unknown(rfs, order, "max_attempts", "initial_interval", "backoff", "max_interval", "jitter", "non_retryable")
	if f, ok := rfs["max_attempts"]; ok {
		r.MaxAttempts, _ = d.integer(f)
	}
	if f, ok := rfs["initial_interval"]; ok {
		if iv, ok := d.duration(f); ok {
			r.InitialInterval = iv
		}
	}
	r.MaxInterval = DefaultMaxIntervalFactor * r.InitialInterval
	if r.MaxInterval/DefaultMaxIntervalFactor != r.InitialInterval {
		r.MaxInterval = math.MaxInt64
	}
	if f, ok := rfs["backoff"]; ok {
		r.Backoff, _ = d.number(f)
	}
	if f, ok := rfs["max_interval"]; ok {
		if mi, ok := d.duration(f); ok {
			r.MaxInterval = mi
		}
	}
	if f, ok := rfs["jitter"]; ok {
		r.Jitter, _ = d.boolean(f)
	}
	if f, ok := rfs["non_retryable"]; ok {
		if f.val.Kind != yaml.SequenceNode {
			d.problem(f.val, f.path, "got %s, want a list of failure codes", describe(f.val))
		} else {
			for i, c := range f.val.Content {
				p := joinIndex(f.path, i)
				if c = d.resolve(c, p); c == nil {
					break
				}
				if code, ok := d.str(field{val: c, path: p}); ok {
					r.NonRetryable = append(r.NonRetryable, code)
				}
			}
		}
	}
	return r
}

func (d *decoder) wait(f field, scope []string) *Wait {
	w := &Wait{}
	wfs, order, ok := d.fields(f.val, f.path, "a map with an event, a key and an optional timeout")
	if !ok {
		return w
	}
	d.unknown(wfs, order, "event", "key", "timeout")
	if f, ok := wfs["event"]; ok {
		w.Event, _ = d.str(f)
	}
	if f, ok := wfs["key"]; ok {
		w.Key = d.value(f, scope, wantAny)
	}
	if f, ok := wfs["timeout"]; ok {
		w.Timeout, w.TimeoutExpr = d.durationOrExpr(f, scope)
	}
	return w
}

// delay decodes a delay step's value: a duration, literal or computed, or
// a map with one field, for (the same, in its long form) or until (an
// absolute time).
func (d *decoder) delay(s *Step, f field, scope []string) {
	if f.val.Kind != yaml.MappingNode {
		s.Delay, s.DelayExpr = d.durationOrExpr(f, scope)
		return
	}
	dfs, order, ok := d.fields(f.val, f.path, "a map with for or until")
	if !ok {
		return
	}
	d.unknown(dfs, order, "for", "until")
	ff, hasFor := dfs["for"]
	uf, hasUntil := dfs["until"]
	switch {
	case hasFor && hasUntil:
		d.problem(f.val, f.path, "a delay has for (a duration) or until (a time), not both")
	case hasFor:
		s.delayForm = "for"
		s.Delay, s.DelayExpr = d.durationOrExpr(ff, scope)
	case hasUntil:
		s.delayForm = "until"
		s.DelayUntil = d.until(uf, scope)
	default:
		d.problem(f.val, f.path, "required: for (a duration) or until (a time)")
	}
}

// durationOrExpr decodes a duration that may be computed: a string with a
// ${ } expression is compiled, and its result checked when its step runs;
// anything else is a literal duration, checked as duration does.
func (d *decoder) durationOrExpr(f field, scope []string) (time.Duration, Value) {
	if hasExpr(f.val) {
		return 0, d.value(f, scope, wantDuration)
	}
	dur, _ := d.duration(f)
	return dur, Value{}
}

// until decodes a delay's absolute time: a literal, which must be RFC
// 3339 with a zone offset (YAML reads an unquoted one as a timestamp), or
// an expression.
func (d *decoder) until(f field, scope []string) Value {
	if hasExpr(f.val) {
		return d.value(f, scope, wantTime)
	}
	if f.val.Kind != yaml.ScalarNode || (f.val.ShortTag() != "!!str" && f.val.ShortTag() != "!!timestamp") {
		d.problem(f.val, f.path, "got %s, want a time such as 2026-03-01T09:00:00Z (RFC 3339 with a zone offset) or a ${ } expression", describe(f.val))
		return Value{}
	}
	if _, err := parseTime(f.val.Value); err != nil {
		d.problem(f.val, f.path, "%v", err)
		return Value{}
	}
	return d.value(f, scope, wantTime)
}

// hasExpr reports whether n is a string holding a ${ } expression, or
// what starts one and does not end: the compiler then says what is wrong.
func hasExpr(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return false
	}
	_, srcs, err := splitTemplate(n.Value)
	return err != nil || len(srcs) > 0
}

func (d *decoder) parallel(f field, scope []string) []Branch {
	if f.val.Kind != yaml.SequenceNode {
		d.problem(f.val, f.path, "got %s, want a list of branches", describe(f.val))
		return []Branch{}
	}
	bs := make([]Branch, len(f.val.Content))
	for i, c := range f.val.Content {
		p := joinIndex(f.path, i)
		if c = d.resolve(c, p); c == nil {
			break
		}
		bfs, order, ok := d.fields(c, p, "a branch (a map with steps)")
		if !ok {
			continue
		}
		d.unknown(bfs, order, "steps")
		if sf, ok := bfs["steps"]; ok {
			bs[i].Steps = d.steps(sf, scope)
		}
	}
	return bs
}
