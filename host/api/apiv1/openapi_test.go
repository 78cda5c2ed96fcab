package apiv1_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
)

// shapes maps each document of the contract to where openapi.json
// describes it: a JSON pointer into the document.
var shapes = []struct {
	pointer string
	typ     reflect.Type
}{
	{"/components/schemas/Problem", reflect.TypeFor[apiv1.Problem]()},
	{"/components/schemas/Plugin", reflect.TypeFor[apiv1.Plugin]()},
	{"/components/schemas/PluginDetail", reflect.TypeFor[apiv1.PluginDetail]()},
	{"/components/schemas/Needs", reflect.TypeFor[apiv1.Needs]()},
	{"/components/schemas/Grants", reflect.TypeFor[apiv1.Grants]()},
	{"/components/schemas/GrantDocument", reflect.TypeFor[apiv1.GrantDocument]()},
	{"/components/schemas/Workflow", reflect.TypeFor[apiv1.Workflow]()},
	{"/components/schemas/WorkflowPause", reflect.TypeFor[apiv1.WorkflowPause]()},
	{"/components/schemas/WorkflowResume", reflect.TypeFor[apiv1.WorkflowResume]()},
	{"/components/schemas/StartRequest", reflect.TypeFor[apiv1.StartRequest]()},
	{"/components/schemas/Instance", reflect.TypeFor[apiv1.Instance]()},
	{"/components/schemas/HistoryEvent", reflect.TypeFor[apiv1.HistoryEntry]()},
	{"/components/schemas/LogLine", reflect.TypeFor[apiv1.LogEntry]()},
	{"/components/schemas/EventRequest", reflect.TypeFor[apiv1.EventRequest]()},
	{"/components/schemas/EventOutcome", reflect.TypeFor[apiv1.EventOutcome]()},
	{"/components/schemas/Stimulus", reflect.TypeFor[apiv1.Stimulus]()},
	{"/components/schemas/RefreshResult", reflect.TypeFor[apiv1.RefreshResult]()},
	{"/components/schemas/Schedule", reflect.TypeFor[apiv1.Schedule]()},
	{"/components/schemas/ScheduleRun", reflect.TypeFor[apiv1.ScheduleRun]()},
	{"/components/schemas/ScheduleEvent", reflect.TypeFor[apiv1.ScheduleEvent]()},
	{"/components/schemas/BackfillRequest", reflect.TypeFor[apiv1.BackfillRequest]()},
	{"/components/schemas/BackfillResult", reflect.TypeFor[apiv1.BackfillResult]()},
	{"/components/schemas/ConcurrencyKey", reflect.TypeFor[apiv1.ConcurrencyKey]()},
	{"/components/schemas/SlotHolder", reflect.TypeFor[apiv1.SlotHolder]()},
	{"/components/schemas/SlotWaiter", reflect.TypeFor[apiv1.SlotWaiter]()},
	{"/components/schemas/ConcurrencyLine", reflect.TypeFor[apiv1.ConcurrencyLine]()},
	{"/components/schemas/RateLimitKey", reflect.TypeFor[apiv1.RateLimitKey]()},
	{"/components/schemas/RateLimits", reflect.TypeFor[apiv1.RateLimits]()},
	{"/components/schemas/SearchAttribute", reflect.TypeFor[apiv1.SearchAttribute]()},
	{"/components/schemas/SearchAttributes", reflect.TypeFor[apiv1.SearchAttributes]()},
	{"/components/schemas/Batch", reflect.TypeFor[apiv1.Batch]()},
	{"/components/schemas/BatchItem", reflect.TypeFor[apiv1.BatchItem]()},
	{"/components/schemas/BatchRequest", reflect.TypeFor[apiv1.BatchRequest]()},
	{"/components/schemas/BatchArgs", reflect.TypeFor[apiv1.BatchArgs]()},
	{"/components/schemas/ResetPoint", reflect.TypeFor[apiv1.ResetPoint]()},
	{"/components/schemas/MigrationPlan", reflect.TypeFor[apiv1.MigrationPlan]()},
	{"/components/schemas/MigrationPoint", reflect.TypeFor[apiv1.MigrationPoint]()},
	{"/components/schemas/MigrationProblem", reflect.TypeFor[apiv1.MigrationProblem]()},
	{"/components/schemas/PinChange", reflect.TypeFor[apiv1.PinChange]()},
	{answer("/v1/plugins", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.Plugin]]()},
	{answer("/v1/workflows", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.Workflow]]()},
	{answer("/v1/instances", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.Instance]]()},
	{answer("/v1/instances/{id}/history", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.HistoryEntry]]()},
	{answer("/v1/instances/{id}/logs", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.LogEntry]]()},
	{answer("/v1/events/dead", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.Stimulus]]()},
	{answer("/v1/events/queued", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.Stimulus]]()},
	{answer("/v1/counts/instances", "get", "200"), reflect.TypeFor[apiv1.Counts]()},
	{answer("/v1/instances/{id}/tapes", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.TapeSummary]]()},
	{answer("/v1/instances/{id}/tapes/{attempt}", "get", "200"), reflect.TypeFor[apiv1.Tape]()},
	{answer("/v1/instances/{id}/tapes/{attempt}/replay", "post", "200"), reflect.TypeFor[apiv1.ReplayReport]()},
	{answer("/v1/plugins/{name}/shadow", "post", "200"), reflect.TypeFor[apiv1.ShadowReport]()},
	{answer("/v1/instances/cancel", "post", "200"), reflect.TypeFor[apiv1.Page[apiv1.BulkOutcome]]()},
	{body("/v1/instances/cancel", "post"), reflect.TypeFor[apiv1.BulkCancelRequest]()},
	{body("/v1/instances/{id}/cancel", "post"), reflect.TypeFor[apiv1.CancelRequest]()},
	{body("/v1/instances/{id}/retry", "post"), reflect.TypeFor[apiv1.RetryRequest]()},
	{body("/v1/instances/{id}/pause", "post"), reflect.TypeFor[apiv1.InstancePauseRequest]()},
	{body("/v1/instances/{id}/resume", "post"), reflect.TypeFor[apiv1.InstanceResumeRequest]()},
	{body("/v1/workflows/{name}/pause", "post"), reflect.TypeFor[apiv1.WorkflowPauseRequest]()},
	{body("/v1/workflows/{name}/resume", "post"), reflect.TypeFor[apiv1.WorkflowResumeRequest]()},
	{answer("/v1/workflow-pauses", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.WorkflowPause]]()},
	{body("/v1/admin/refresh", "post"), reflect.TypeFor[apiv1.RefreshRequest]()},
	{answer("/v1/schedules", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.Schedule]]()},
	{answer("/v1/schedules/{id}/events", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.ScheduleEvent]]()},
	{body("/v1/schedules/{id}/pause", "post"), reflect.TypeFor[apiv1.PauseRequest]()},
	{body("/v1/schedules/{id}/unpause", "post"), reflect.TypeFor[apiv1.PauseRequest]()},
	{body("/v1/schedules/{id}/trigger", "post"), reflect.TypeFor[apiv1.TriggerRequest]()},
	{answer("/v1/concurrency", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.ConcurrencyKey]]()},
	{answer("/v1/step-concurrency", "get", "200"), reflect.TypeFor[apiv1.ConcurrencyLine]()},
	{answer("/v1/rate-limits", "get", "200"), reflect.TypeFor[apiv1.RateLimits]()},
	{answer("/v1/batches", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.Batch]]()},
	{body("/v1/batches", "post"), reflect.TypeFor[apiv1.BatchRequest]()},
	{answer("/v1/batches/{id}/items", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.BatchItem]]()},
	{body("/v1/batches/{id}/cancel", "post"), reflect.TypeFor[apiv1.BatchCancelRequest]()},
	{answer("/v1/instances/{id}/reset-points", "get", "200"), reflect.TypeFor[apiv1.Page[apiv1.ResetPoint]]()},
	{body("/v1/instances/{id}/reset", "post"), reflect.TypeFor[apiv1.ResetRequest]()},
	{body("/v1/instances/{id}/migrate", "post"), reflect.TypeFor[apiv1.MigrateRequest]()},
}

// enumSchemas maps the schemas of openapi.json that are enumerations to
// the type whose constants are their values.
var enumSchemas = map[string]string{
	"InstanceStatus": "Status",
}

// unmapped are the schemas of openapi.json that no type of the package
// describes, and why.
var unmapped = map[string]string{
	// The probes' answer: the client reads only the status code.
	"Health": "a probe's answer",
	// The host's own format (internal/engine's State), which the API and the
	// client pass through as it is, unread.
	"State": "opaque to the contract",
}

// freeForm are the places where openapi.json says only "an object", and
// the Go type says more.
var freeForm = map[string]bool{
	"RefreshResult.files[].problems[]": true,
}

// answer is the pointer to the JSON schema of an operation's answer.
func answer(path, method, status string) string {
	return "/paths/" + escape(path) + "/" + method + "/responses/" + status + "/content/application~1json/schema"
}

// body is the pointer to the JSON schema of an operation's request body.
func body(path, method string) string {
	return "/paths/" + escape(path) + "/" + method + "/requestBody/content/application~1json/schema"
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// TestOpenAPI checks every document of the package against openapi.json:
// the JSON names of a type's fields are the properties of its schema, no
// more and no fewer, at every level; a required property is never
// omitted; the JSON types agree; a field of a named string type that has
// constants takes the values of the schema's enum, exactly; and every
// schema of the document is a type's, or said not to be.
func TestOpenAPI(t *testing.T) {
	t.Parallel()
	doc := readDocument(t)
	consts := constants(t)
	// The history's types are open on the wire (apiv1.HistoryType has no
	// constants); the ones this version writes are the host's.
	consts["HistoryType"] = constantsIn(t, "../../weft")["HistoryType"]
	// So are a schedule's record's (apiv1.ScheduleEventType).
	consts["ScheduleEventType"] = constantsIn(t, "../../weft")["ScheduleEventType"]
	mapped := map[string]bool{}
	for _, s := range shapes {
		if name, ok := strings.CutPrefix(s.pointer, "/components/schemas/"); ok {
			mapped[name] = true
		}
		schema := doc.at(t, s.pointer)
		c := &checker{t: t, doc: doc, consts: consts}
		c.shape(strings.ReplaceAll(s.typ.Name(), s.typ.PkgPath()+".", ""), schema, s.typ)
	}
	for name, typ := range enumSchemas {
		mapped[name] = true
		sameValues(t, name, typ, consts[typ], enum(doc.at(t, "/components/schemas/"+name)))
	}
	schemas, _ := doc.at(t, "/components/schemas").(map[string]any)
	for name := range schemas {
		if !mapped[name] && unmapped[name] == "" {
			t.Errorf("openapi.json's schema %s has no type in apiv1: map it in shapes, or say why not in unmapped", name)
		}
	}
}

// TestOpenAPIUntil checks the values of ?until= against its enum, in
// every operation that takes it.
func TestOpenAPIUntil(t *testing.T) {
	t.Parallel()
	doc := readDocument(t)
	consts := constants(t)
	n := 0
	paths, _ := doc.at(t, "/paths").(map[string]any)
	for path, ops := range paths {
		ops, _ := ops.(map[string]any)
		for method, op := range ops {
			op, _ := op.(map[string]any)
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				p, _ := p.(map[string]any)
				if p["name"] == "until" && p["in"] == "query" {
					n++
					sameValues(t, method+" "+path+" ?until=", "Until", consts["Until"], enum(p["schema"]))
				}
			}
		}
	}
	if n == 0 {
		t.Error("openapi.json has no ?until= parameter; the Until constants describe nothing")
	}
}

// TestOpenAPIProblems checks that every error answer openapi.json
// describes is a problem document of ProblemContentType.
func TestOpenAPIProblems(t *testing.T) {
	t.Parallel()
	doc := readDocument(t)
	n := 0
	paths, _ := doc.at(t, "/paths").(map[string]any)
	for path, ops := range paths {
		ops, _ := ops.(map[string]any)
		for method, op := range ops {
			op, _ := op.(map[string]any)
			responses, _ := op["responses"].(map[string]any)
			for status, r := range responses {
				if status < "400" {
					continue
				}
				r := doc.resolve(t, r)
				content, _ := r["content"].(map[string]any)
				for ct, c := range content {
					n++
					schema, _ := c.(map[string]any)["schema"].(map[string]any)
					if ct != apiv1.ProblemContentType || schema["$ref"] != "#/components/schemas/Problem" {
						t.Errorf("%s %s answers %s as %s %v, want %s #/components/schemas/Problem", method, path, status, ct, schema["$ref"], apiv1.ProblemContentType)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Error("openapi.json describes no error answer")
	}
}

// TestOpenAPIFailsOnDrift checks that the checker sees a field that one
// side has and the other has not, either way, and an enum that differs.
func TestOpenAPIFailsOnDrift(t *testing.T) {
	t.Parallel()
	doc := readDocument(t)
	consts := constants(t)
	schema := map[string]any{
		"type":     "object",
		"required": []any{"a"},
		"properties": map[string]any{
			"a":    map[string]any{"type": "string"},
			"only": map[string]any{"type": "string"},
			"kind": map[string]any{"type": "string", "enum": []any{"ended"}},
		},
	}
	type drifted struct {
		A     string      `json:"a,omitempty"`
		Extra int         `json:"extra"`
		Kind  apiv1.Until `json:"kind"`
	}
	rec := &recorder{}
	c := &checker{t: rec, doc: doc, consts: consts}
	c.shape("drifted", schema, reflect.TypeFor[drifted]())
	for _, want := range []string{"drifted.extra", "drifted.only", "drifted.a is required", "drifted.kind"} {
		if !slices.ContainsFunc(rec.errs, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("the checker did not report %q; it reported %q", want, rec.errs)
		}
	}
}

// recorder is a testing.TB's Errorf that keeps what it is told.
type recorder struct{ errs []string }

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Helper() {}

// reporter is what the checker reports to: a *testing.T, or a recorder.
type reporter interface {
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Helper()
}

// document is openapi.json, decoded.
type document struct{ root map[string]any }

func readDocument(t *testing.T) document {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return document{root}
}

// at returns what the JSON pointer p points at.
func (d document) at(t reporter, p string) any {
	t.Helper()
	var v any = d.root
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("openapi.json has nothing at %s (at %q)", p, tok)
			return nil
		}
		if v, ok = m[tok]; !ok {
			t.Fatalf("openapi.json has nothing at %s (no %q)", p, tok)
			return nil
		}
	}
	return v
}

// resolve follows v's $ref, if it has one, within the document.
func (d document) resolve(t reporter, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			break
		}
		m, _ = d.at(t, strings.TrimPrefix(ref, "#")).(map[string]any)
	}
	return m
}

// checker compares Go types with schemas.
type checker struct {
	t      reporter
	doc    document
	consts map[string][]string
}

// object returns the properties and required names of an object schema:
// its own, those of every allOf part, those of its oneOf part that is not
// null. ok is false when the schema says nothing of its properties.
func (c *checker) object(schema map[string]any) (props map[string]any, required []string, ok bool) {
	schema = c.doc.resolve(c.t, schema)
	props = map[string]any{}
	if p, has := schema["properties"].(map[string]any); has {
		ok = true
		for k, v := range p {
			props[k] = v
		}
	}
	required = append(required, asStrings(schema["required"])...)
	for _, key := range []string{"allOf", "oneOf"} {
		parts, _ := schema[key].([]any)
		for _, part := range parts {
			part := c.doc.resolve(c.t, part)
			if key == "oneOf" && part["type"] == "null" {
				continue
			}
			p, r, has := c.object(part)
			if has {
				ok = true
				for k, v := range p {
					props[k] = v
				}
				required = append(required, r...)
			}
		}
	}
	return props, required, ok
}

// shape checks the struct typ against the object schema, at where.
func (c *checker) shape(where string, schema any, typ reflect.Type) {
	props, required, ok := c.object(c.doc.resolve(c.t, schema))
	if !ok {
		if !freeForm[where] {
			c.t.Errorf("%s: openapi.json describes no properties for %s; describe them, or list %s in freeForm", where, typ, where)
		}
		return
	}
	fields := jsonFields(typ)
	for name, f := range fields {
		p, has := props[name]
		if !has {
			c.t.Errorf("%s.%s: %s has the field %s, which openapi.json does not describe", where, name, typ, f.name)
			continue
		}
		c.field(where+"."+name, c.doc.resolve(c.t, p), f)
	}
	for name := range props {
		if _, has := fields[name]; !has {
			c.t.Errorf("%s.%s: openapi.json describes a property that %s has no field for", where, name, typ)
		}
	}
	for _, name := range required {
		if f, has := fields[name]; has && f.omitted {
			c.t.Errorf("%s.%s is required by openapi.json, but %s's field %s is omitted when empty", where, name, typ, f.name)
		}
	}
}

// field checks one field against its property's schema.
func (c *checker) field(where string, schema map[string]any, f jsonField) {
	typ := f.typ
	nullable := false
	for typ.Kind() == reflect.Pointer {
		typ, nullable = typ.Elem(), true
	}
	if typ == reflect.TypeFor[json.RawMessage]() {
		return // any JSON value
	}
	if want := jsonType(typ); want != "" {
		types := asStrings(schema["type"])
		if len(types) > 0 && !slices.Contains(types, want) {
			c.t.Errorf("%s: openapi.json says %v, but the field is a %s (JSON %s)", where, types, f.typ, want)
		}
		if slices.Contains(types, "null") && !nullable && typ.Kind() != reflect.Slice && typ.Kind() != reflect.Map {
			c.t.Errorf("%s: openapi.json allows null, but the field is a %s, never null", where, f.typ)
		}
	}
	c.enum(where, schema, typ)
	switch typ.Kind() {
	case reflect.Struct:
		if typ != reflect.TypeFor[time.Time]() {
			c.shape(where, schema, typ)
		}
	case reflect.Slice:
		elem := typ.Elem()
		items := c.doc.resolve(c.t, schema["items"])
		if items == nil {
			c.t.Errorf("%s: the field is a %s, and openapi.json describes no items", where, f.typ)
			return
		}
		for elem.Kind() == reflect.Pointer {
			elem = elem.Elem()
		}
		c.enum(where+"[]", items, elem)
		if elem.Kind() == reflect.Struct && elem != reflect.TypeFor[time.Time]() {
			c.shape(where+"[]", items, elem)
		}
	case reflect.Map:
		// A map keyed by an enumeration has a property for each value.
		if _, ok := schema["properties"]; ok {
			props, _ := schema["properties"].(map[string]any)
			var names []any
			for k := range props {
				names = append(names, k)
			}
			c.values(where+" (the properties)", typ.Key(), names)
		}
	}
}

// enum checks that a field of a named string type with constants takes
// exactly the values of its schema's enum.
func (c *checker) enum(where string, schema map[string]any, typ reflect.Type) {
	if typ.Kind() != reflect.String || typ.PkgPath() != reflect.TypeFor[apiv1.Status]().PkgPath() {
		return
	}
	if len(c.consts[typ.Name()]) == 0 {
		return
	}
	e, ok := schema["enum"].([]any)
	if !ok {
		c.t.Errorf("%s: the field is a %s, whose constants are %q, and openapi.json gives no enum", where, typ.Name(), c.consts[typ.Name()])
		return
	}
	c.values(where, typ, e)
}

// values checks that the constants of typ are the values given.
func (c *checker) values(where string, typ reflect.Type, values []any) {
	sameValues(c.t, where, typ.Name(), c.consts[typ.Name()], values)
}

// sameValues checks that the constants of the type named typ are the
// values of an enum, in any order.
func sameValues(t reporter, where, typ string, consts []string, values []any) {
	t.Helper()
	var vals []string
	for _, v := range values {
		s, _ := v.(string)
		vals = append(vals, s)
	}
	have, want := slices.Sorted(slices.Values(consts)), slices.Sorted(slices.Values(vals))
	if !slices.Equal(have, want) {
		t.Errorf("%s: the constants of %s are %q, openapi.json's enum is %q", where, typ, have, want)
	}
}

// enum returns the enum of a schema.
func enum(schema any) []any {
	m, _ := schema.(map[string]any)
	e, _ := m["enum"].([]any)
	return e
}

// jsonType is the JSON type that encoding/json writes for typ, or "" when
// it does not say (an interface).
func jsonType(typ reflect.Type) string {
	if typ == reflect.TypeFor[time.Time]() {
		return "string"
	}
	switch typ.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return ""
}

// asStrings reads a JSON string or list of strings.
func asStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// jsonField is one field as encoding/json writes it.
type jsonField struct {
	name string // the Go name
	typ  reflect.Type
	// omitted is true for a field with omitempty or omitzero.
	omitted bool
}

// jsonFields returns the fields encoding/json writes of the struct typ, by
// JSON name, those of embedded structs without a name of their own
// included.
func jsonFields(typ reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitted := false
		for _, o := range strings.Split(opts, ",") {
			omitted = omitted || o == "omitempty" || o == "omitzero"
		}
		out[name] = jsonField{name: f.Name, typ: f.Type, omitted: omitted}
	}
	return out
}

// constants returns the values of the string constants the package
// declares, by the name of their type, read from its source.
func constants(t *testing.T) map[string][]string {
	t.Helper()
	out := constantsIn(t, ".")
	if len(out["Status"]) == 0 {
		t.Fatal("found no constant of type Status in the package's source")
	}
	return out
}

// constantsIn is constants of the package in dir.
func constantsIn(t *testing.T, dir string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string][]string{}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				typ, ok := vs.Type.(*ast.Ident)
				if !ok {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[typ.Name] = append(out[typ.Name], s)
				}
			}
		}
	}
	return out
}
