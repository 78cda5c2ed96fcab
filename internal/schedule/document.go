package schedule

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
)

// Document is a schedule as an operator writes it, in YAML or JSON
// (docs/schedules.md): which workflow it starts, with which input, when,
// and under which policy.
type Document struct {
	ID       string
	Workflow string
	// Input is each run's input; its expressions read `schedule` (id,
	// time, kind). Zero: each run's input is null.
	Input definition.Value
	// Priority, when not 0, is each run's priority in the ready queue
	// (weft.HighestPriority … weft.LowestPriority), before the one its
	// workflow's definition computes.
	Priority int
	Spec     Spec
	Policy   Policy

	input    any // Input's source, for Canonical
	hasInput bool
	cal      *Calendar
}

// MaxDocument bounds a schedule document, in bytes.
const MaxDocument = 64 << 10

// ParseDocument reads and checks a schedule document. Every problem comes
// back at once in an *weft.ScheduleError, each with its path (spec.cron[0]) and, when
// it has one, its line and column.
func ParseDocument(data []byte) (*Document, error) {
	return ParseDocumentAs(data, "")
}

// ParseDocumentAs is ParseDocument for a document that must be the
// schedule id (its place in a URL, say): an id that differs is one more
// problem, at path id, with the others.
func ParseDocumentAs(data []byte, id string) (*Document, error) {
	if len(data) > MaxDocument {
		return nil, &weft.ScheduleError{Problems: []weft.Problem{{Path: "", Message: fmt.Sprintf("the document is %d bytes, more than %d", len(data), MaxDocument)}}}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		msg := "the document is empty"
		if !errors.Is(err, io.EOF) {
			msg = "not YAML or JSON: " + err.Error()
		}
		return nil, &weft.ScheduleError{Problems: []weft.Problem{{Message: msg}}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &weft.ScheduleError{Problems: []weft.Problem{{Message: "holds more than one document", Line: extra.Line, Column: extra.Column}}}
	}
	p := parser{at: map[string]*yaml.Node{}}
	d := p.document(root.Content[0])
	if n := p.at["id"]; id != "" && d != nil && d.ID != "" && d.ID != id {
		p.bad(n, "id", "the schedule is %q but was sent as %q", d.ID, id)
	}
	if len(p.errs) > 0 {
		// In document order; the rules between fields, which have no
		// place, last.
		slices.SortStableFunc(p.errs, func(a, b weft.Problem) int {
			if (a.Line == 0) != (b.Line == 0) {
				return cmp.Compare(b.Line, a.Line)
			}
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
		})
		id := ""
		if d != nil {
			id = d.ID
		}
		return nil, &weft.ScheduleError{ID: id, Problems: p.errs}
	}
	return d, nil
}

// parser walks a document's YAML nodes and collects its problems.
type parser struct {
	errs problems
	// at is the node of each path read, so that a problem a later check
	// finds (the calendar's, the policy's) says where it is.
	at map[string]*yaml.Node
}

func (p *parser) bad(n *yaml.Node, path, format string, args ...any) {
	pr := weft.Problem{Path: path, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		pr.Line, pr.Column = n.Line, n.Column
	}
	p.errs = append(p.errs, pr)
}

// fields returns a mapping's values by key, refusing other node kinds,
// duplicate keys and keys not in known.
func (p *parser) fields(n *yaml.Node, path string, known ...string) map[string]*yaml.Node {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.bad(n, path, "want a mapping")
		return nil
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := join(path, k.Value)
		switch {
		case !contains(known, k.Value):
			p.bad(k, key, "unknown field; the fields here are %v", known)
		case out[k.Value] != nil:
			p.bad(k, key, "appears twice")
		default:
			out[k.Value] = v
			p.at[key] = v
		}
	}
	return out
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// also adds the problems of a check that ran on the decoded fields, but
// those at or around a path whose decoding failed already.
func (p *parser) also(err error) {
	var e *weft.ScheduleError
	if !errors.As(err, &e) {
		return
	}
	bad := slices.Clone(p.errs)
	for _, pr := range e.Problems {
		if slices.ContainsFunc(bad, func(b weft.Problem) bool { return related(b.Path, pr.Path) }) {
			continue
		}
		if n := p.at[pr.Path]; n != nil && pr.Line == 0 {
			pr.Line, pr.Column = n.Line, n.Column
		}
		p.errs = append(p.errs, pr)
	}
}

// related reports whether one path is the other or inside it.
func related(a, b string) bool {
	inside := func(x, y string) bool {
		return x == y || strings.HasPrefix(x, y+".") || strings.HasPrefix(x, y+"[")
	}
	return inside(a, b) || inside(b, a)
}

// str reads a string scalar.
func (p *parser) str(n *yaml.Node, path string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.bad(n, path, "want a string")
		return "", false
	}
	return n.Value, true
}

// name reads a name with the rules of a workflow's.
func (p *parser) name(n *yaml.Node, path string) string {
	s, ok := p.str(n, path)
	if ok && !abi.ValidName(s) {
		p.bad(n, path, "%q: 1 to %d characters from a-z, 0-9, '_' and '-', starting with a letter", s, abi.MaxNameLen)
	}
	return s
}

// duration reads a duration (definition.ParseDuration: Go's, led by
// whole days).
func (p *parser) duration(n *yaml.Node, path string) time.Duration {
	s, ok := p.str(n, path)
	if !ok {
		return 0
	}
	d, err := definition.ParseDuration(s)
	if err != nil {
		p.bad(n, path, "%v", err)
	}
	return d
}

// time reads an RFC 3339 time with its offset.
func (p *parser) time(n *yaml.Node, path string) time.Time {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!timestamp") {
		p.bad(n, path, "want an RFC 3339 time such as 2026-06-01T09:00:00+02:00")
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, n.Value)
	if err != nil {
		p.bad(n, path, "%q is not an RFC 3339 time with an offset, such as 2026-06-01T09:00:00+02:00", n.Value)
	}
	return t
}

func (p *parser) document(n *yaml.Node) *Document {
	f := p.fields(n, "", "id", "workflow", "input", "priority", "spec", "policy")
	if f == nil {
		return nil
	}
	d := &Document{}
	for _, req := range []string{"id", "workflow", "spec"} {
		if f[req] == nil {
			p.bad(n, req, "is required")
		}
	}
	if f["id"] != nil {
		d.ID = p.name(f["id"], "id")
	}
	if f["workflow"] != nil {
		d.Workflow = p.name(f["workflow"], "workflow")
	}
	if in := f["input"]; in != nil {
		var src any
		if err := in.Decode(&src); err != nil {
			p.bad(in, "input", "%v", err)
		} else {
			src = normalize(src)
			if _, err := json.Marshal(src); err != nil {
				p.bad(in, "input", "cannot be written as JSON: %v", err)
			}
			v, problems := definition.CompileValue(src, "input", "schedule")
			for _, pr := range problems {
				p.errs = append(p.errs, weft.Problem{Path: pr.Path, Message: pr.Message, Line: in.Line, Column: in.Column})
			}
			d.Input, d.input, d.hasInput = v, src, true
		}
	}
	if pr := f["priority"]; pr != nil {
		pr = deref(pr)
		v, err := strconv.Atoi(pr.Value)
		switch {
		case pr.Kind != yaml.ScalarNode || pr.Tag != "!!int" || err != nil:
			p.bad(pr, "priority", "want a whole number from %d (first) to %d (last)", weft.HighestPriority, weft.LowestPriority)
		case v < weft.HighestPriority || v > weft.LowestPriority:
			p.bad(pr, "priority", "%d is not from %d (first) to %d (last)", v, weft.HighestPriority, weft.LowestPriority)
		default:
			d.Priority = v
		}
	}
	if f["spec"] != nil {
		d.Spec = p.spec(f["spec"])
	}
	if f["policy"] != nil {
		d.Policy = p.policy(f["policy"])
	}
	// The rules between fields, and the calendar's, are checked too, so
	// that one answer names every problem; a field that failed to decode
	// was left zero, and is not reported again.
	decoded := len(p.errs) == 0
	cal, err := Compile(d.Spec, "spec")
	p.also(err)
	p.also(d.Policy.Check("policy"))
	if !decoded || err != nil {
		return d
	}
	d.cal = cal
	return d
}

func (p *parser) spec(n *yaml.Node) Spec {
	f := p.fields(n, "spec", "cron", "every", "time_zone", "start", "end", "jitter")
	var s Spec
	if f == nil {
		return s
	}
	if c := f["cron"]; c != nil {
		c = deref(c)
		if c.Kind == yaml.SequenceNode {
			for i, e := range c.Content {
				p.at[fmt.Sprintf("spec.cron[%d]", i)] = e
				if v, ok := p.str(e, fmt.Sprintf("spec.cron[%d]", i)); ok {
					s.Cron = append(s.Cron, v)
				}
			}
		} else if v, ok := p.str(c, "spec.cron"); ok {
			p.at["spec.cron[0]"] = c
			s.Cron = []string{v}
		}
	}
	if e := f["every"]; e != nil {
		e = deref(e)
		items := []*yaml.Node{e}
		if e.Kind == yaml.SequenceNode {
			items = e.Content
		}
		for i, it := range items {
			path := fmt.Sprintf("spec.every[%d]", i)
			if e.Kind != yaml.SequenceNode {
				path = "spec.every"
			}
			p.at[path] = it
			it = deref(it)
			if it.Kind == yaml.ScalarNode {
				s.Every = append(s.Every, Interval{Every: p.duration(it, path)})
				continue
			}
			iv := p.fields(it, path, "every", "offset")
			if iv == nil {
				continue
			}
			var v Interval
			if iv["every"] == nil {
				p.bad(it, path+".every", "is required")
			} else {
				v.Every = p.duration(iv["every"], path+".every")
			}
			if iv["offset"] != nil {
				v.Offset = p.duration(iv["offset"], path+".offset")
			}
			s.Every = append(s.Every, v)
		}
	}
	if z := f["time_zone"]; z != nil {
		s.TimeZone, _ = p.str(z, "spec.time_zone")
	}
	if t := f["start"]; t != nil {
		s.Start = p.time(t, "spec.start")
	}
	if t := f["end"]; t != nil {
		s.End = p.time(t, "spec.end")
	}
	if j := f["jitter"]; j != nil {
		s.Jitter = p.duration(j, "spec.jitter")
	}
	return s
}

func (p *parser) policy(n *yaml.Node) Policy {
	f := p.fields(n, "policy", "overlap", "catch_up_window", "pause_on_failure", "max_runs")
	var pol Policy
	if f == nil {
		return pol
	}
	if o := f["overlap"]; o != nil {
		v, _ := p.str(o, "policy.overlap")
		pol.Overlap = Overlap(v)
	}
	if w := f["catch_up_window"]; w != nil {
		pol.CatchUpWindow = p.duration(w, "policy.catch_up_window")
		if pol.CatchUpWindow == 0 {
			p.bad(w, "policy.catch_up_window", "must be at least %s (leave it out for the default, %s)", MinCatchUpWindow, DefaultCatchUpWindow)
		}
	}
	if b := f["pause_on_failure"]; b != nil {
		b = deref(b)
		if b.Kind != yaml.ScalarNode || b.Tag != "!!bool" {
			p.bad(b, "policy.pause_on_failure", "want true or false")
		} else {
			pol.PauseOnFailure = b.Value == "true"
		}
	}
	if m := f["max_runs"]; m != nil {
		m = deref(m)
		v, err := strconv.Atoi(m.Value)
		if m.Kind != yaml.ScalarNode || m.Tag != "!!int" || err != nil {
			p.bad(m, "policy.max_runs", "want a whole number")
		} else {
			pol.MaxRuns = v
		}
	}
	return pol
}

// normalize turns what yaml decodes (map[string]any, ints, times) into
// what the expression compiler takes: JSON's types.
func normalize(x any) any {
	switch v := x.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalize(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = normalize(e)
		}
		return v
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case int64:
		return int(v)
	case uint64:
		return float64(v)
	}
	return x
}

// Calendar is the document's compiled spec.
func (d *Document) Calendar() *Calendar { return d.cal }

// Canonical is the document as JSON with its fields in a fixed order and
// its values as the host reads them (durations and times normalized),
// the form the store keeps: two documents that mean the same thing have
// the same canonical form.
func (d *Document) Canonical() ([]byte, error) {
	type interval struct {
		Every  string `json:"every"`
		Offset string `json:"offset,omitempty"`
	}
	type spec struct {
		Cron     []string   `json:"cron,omitempty"`
		Every    []interval `json:"every,omitempty"`
		TimeZone string     `json:"time_zone,omitempty"`
		Start    string     `json:"start,omitempty"`
		End      string     `json:"end,omitempty"`
		Jitter   string     `json:"jitter,omitempty"`
	}
	type policy struct {
		Overlap        Overlap `json:"overlap,omitempty"`
		CatchUpWindow  string  `json:"catch_up_window,omitempty"`
		PauseOnFailure bool    `json:"pause_on_failure,omitempty"`
		MaxRuns        int     `json:"max_runs,omitempty"`
	}
	doc := struct {
		ID       string  `json:"id"`
		Workflow string  `json:"workflow"`
		Input    any     `json:"input,omitempty"`
		Priority int     `json:"priority,omitempty"`
		Spec     spec    `json:"spec"`
		Policy   *policy `json:"policy,omitempty"`
	}{ID: d.ID, Workflow: d.Workflow, Priority: d.Priority, Spec: spec{Cron: d.Spec.Cron, TimeZone: d.Spec.TimeZone}}
	if d.hasInput {
		doc.Input = d.input
	}
	for _, iv := range d.Spec.Every {
		v := interval{Every: iv.Every.String()}
		if iv.Offset != 0 {
			v.Offset = iv.Offset.String()
		}
		doc.Spec.Every = append(doc.Spec.Every, v)
	}
	if !d.Spec.Start.IsZero() {
		doc.Spec.Start = d.Spec.Start.Format(time.RFC3339)
	}
	if !d.Spec.End.IsZero() {
		doc.Spec.End = d.Spec.End.Format(time.RFC3339)
	}
	if d.Spec.Jitter != 0 {
		doc.Spec.Jitter = d.Spec.Jitter.String()
	}
	if d.Policy != (Policy{}) {
		doc.Policy = &policy{Overlap: d.Policy.Overlap, PauseOnFailure: d.Policy.PauseOnFailure, MaxRuns: d.Policy.MaxRuns}
		if d.Policy.CatchUpWindow != 0 {
			doc.Policy.CatchUpWindow = d.Policy.CatchUpWindow.String()
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		// ParseDocument refused an input that JSON cannot hold.
		return nil, fmt.Errorf("schedule: the canonical form of %s: %w", d.ID, err)
	}
	return b, nil
}

// RunInput evaluates the document's input for a fire: its expressions
// see schedule.id, schedule.time (the nominal time, RFC 3339 in the
// schedule's zone) and schedule.kind. Nil when the document has none.
func (d *Document) RunInput(f Fire) (json.RawMessage, error) {
	if !d.hasInput {
		return nil, nil
	}
	loc := time.UTC
	if d.cal != nil {
		loc = d.cal.Location()
	}
	env := definition.Env{Locals: map[string]any{"schedule": map[string]any{
		"id":   d.ID,
		"time": f.Nominal.In(loc).Format(time.RFC3339),
		"kind": string(f.Kind),
	}}}
	v, err := d.Input.Eval(env)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	return b, nil
}
