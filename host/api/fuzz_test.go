package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/internal/testplugins"
)

// FuzzAPI sends requests built from the OpenAPI document to a real node
// over loopback: an operation of the document, its path parameters and
// query parameters, a body generated from the operation's schema (or raw
// bytes), a media type and a token, each chosen by the fuzzer. Whatever
// the request, the host answers it without a 5xx (no fault is injected
// here), a refusal is a problem document, and the host stays healthy.
//
// The node is shared by the iterations of a fuzzing process, as a real
// host is shared by its clients: the fuzzer's requests change its state
// (deleting the plugin, cancelling the instance, ...), and the seeds put
// back what the interesting requests need.
func FuzzAPI(f *testing.F) {
	// The request timeout bounds what a fuzzed ?wait= holds (a wait
	// answers at the request's end with the instance as it is); it is
	// still long enough for any other request on a loaded machine under
	// the race detector (a 503 for a request that ran out of time would
	// fail the target).
	h := newHostWith(f, hostOptions{api: api.Config{Tokens: testTokens(), RequestTimeout: 10 * time.Second}})
	ops, schemas := documentedWithSchemas(f)
	h.fuzzFixtures(f)

	for i := range ops {
		f.Add(uint16(i), uint8(0), "kit", "", []byte("{}"))
		f.Add(uint16(i), uint8(0b0100_0000), "fz-1", "limit=2", []byte(`{"name":"fz.go","key":"k"}`))
	}
	f.Add(uint16(0), uint8(0xff), "%2e%2e", "wait=59s\x00until=suspended", []byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, opIndex uint16, flags uint8, param, query string, body []byte) {
		op := ops[int(opIndex)%len(ops)]
		req := fuzzRequest{op: op, flags: flags, param: param, query: query, body: body}
		method, path, ct, token, b := req.build(schemas)
		r, err := h.try(method, path, token, ct, b)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if r.status >= 500 {
			t.Fatalf("%s %s (%s, %d bytes): status %d: %s", method, path, ct, len(b), r.status, r.body)
		}
		if r.status >= 400 && r.header.Get("Content-Type") != apiv1.ProblemContentType {
			t.Fatalf("%s %s: status %d answered %q, not a problem document: %s", method, path, r.status, r.header.Get("Content-Type"), r.body)
		}
		if r.status >= 400 {
			var p apiv1.Problem
			if err := json.Unmarshal(r.body, &p); err != nil || p.Status != r.status || p.Detail == "" {
				t.Fatalf("%s %s: malformed problem for %d: %s", method, path, r.status, r.body)
			}
		}
		for _, probe := range []string{"/healthz", "/readyz"} {
			if hr, err := h.try("GET", probe, "", "", nil); err != nil || hr.status != http.StatusOK {
				t.Fatalf("after %s %s: %s answers %v %d: %s", method, path, probe, err, hr.status, hr.body)
			}
		}
	})
}

// fuzzFixtures puts in the node what the seeds' requests name: the kit
// plugin, a workflow that waits for an event, and an instance of it.
// They go in through the node: a fuzzing process's requests have a short
// timeout, which a compile under load can pass.
func (h *host) fuzzFixtures(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	if _, _, err := h.node.PutPlugin(ctx, "kit", testplugins.Bytes(tb, "kit")); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := h.node.SaveDefinition(ctx, []byte(`
name: fz
steps:
  - { id: a, activity: kit.echo, input: "${ input }", output: a }
  - { id: w, wait: { event: fz.go, key: k, timeout: 1h }, output: w }
`)); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := h.node.Start(ctx, "fz", json.RawMessage(`{"n": 1}`), "fz-1"); err != nil {
		tb.Fatal(err)
	}
}

// fuzzRequest turns the fuzzer's inputs into a request for op.
//
// flags: bits 0-2 choose the token (admin, operator, reader, none, a wrong
// one), bits 3-4 the media type (the operation's first, another of its
// own, none, an unrelated one), bit 5 raw body bytes instead of a
// generated body, bit 6 path parameters from the fixtures' names instead
// of param, bit 7 param unescaped in the path.
type fuzzRequest struct {
	op    operation
	flags uint8
	param string
	query string // values for the query parameters, in order, NUL-separated
	body  []byte // raw body, or the generator's choices
}

func (r fuzzRequest) build(schemas map[string]*schema) (method, path, contentType, token string, body []byte) {
	token = []string{adminSecret, operatorSecret, readerSecret, "", "not-a-token"}[int(r.flags&7)%5]
	fixtures := []string{"kit", "fz", "fz-1", "fz.go", "nope"}
	path = r.op.path
	for _, p := range r.op.params {
		if p.In != "path" {
			continue
		}
		v := url.PathEscape(r.param)
		switch {
		case r.flags&(1<<6) != 0:
			v = fixtures[len(r.param)%len(fixtures)]
		case r.flags&(1<<7) != 0:
			v = strings.Map(func(c rune) rune { // the client refuses control bytes
				if c < 0x21 || c == 0x7f || c == '?' || c == '#' {
					return -1
				}
				return c
			}, r.param)
		}
		path = strings.ReplaceAll(path, "{"+p.Name+"}", v)
	}
	q := url.Values{}
	values := strings.Split(r.query, "\x00")
	i := 0
	for _, p := range r.op.params {
		if p.In != "query" {
			continue
		}
		if i < len(values) && values[i] != "" {
			v := values[i]
			// "name=value" sets the value; a bare value is the value.
			if name, val, ok := strings.Cut(v, "="); ok && name == p.Name {
				v = val
			}
			q.Set(p.Name, v)
		}
		i++
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	method = r.op.method
	types := make([]string, 0, len(r.op.bodies))
	for mt := range r.op.bodies {
		types = append(types, mt)
	}
	slices.Sort(types)
	switch (r.flags >> 3) & 3 {
	case 0, 1:
		if len(types) > 0 {
			contentType = types[int(r.flags>>3&1)%len(types)]
		} else if len(r.body) > 0 {
			contentType = "application/json"
		}
	case 2:
	case 3:
		contentType = "text/plain; charset=utf-8"
	}
	if r.flags&(1<<5) != 0 || contentType == "" {
		return method, path, contentType, token, r.body
	}
	s := r.op.bodies[contentType]
	if s == nil {
		return method, path, contentType, token, r.body
	}
	g := &generator{schemas: schemas, choices: r.body}
	v := g.value(s, 0)
	if str, ok := v.(string); ok && !strings.Contains(contentType, "json") {
		return method, path, contentType, token, []byte(str)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshalling a generated body: %v", err))
	}
	return method, path, contentType, token, b
}

// generator builds a JSON value that follows a schema, mostly, taking
// its choices from the fuzzer's bytes.
type generator struct {
	schemas map[string]*schema // the document's components, by name
	choices []byte
}

func (g *generator) next() byte {
	if len(g.choices) == 0 {
		return 0
	}
	c := g.choices[0]
	g.choices = g.choices[1:]
	return c
}

// text takes a short string from the choices, or a fixture's name.
func (g *generator) text() string {
	n := int(g.next() % 16)
	if n < 4 {
		return []string{"kit", "fz", "fz-1", "fz.go"}[n]
	}
	n -= 4
	n = min(n, len(g.choices))
	s := string(g.choices[:n])
	g.choices = g.choices[n:]
	return s
}

func (g *generator) value(s *schema, depth int) any {
	if s == nil || depth > 6 {
		return nil
	}
	if s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		return g.value(g.schemas[name], depth+1)
	}
	// One byte in sixteen breaks the schema: the wrong type.
	if g.next()%16 == 0 {
		return []any{nil, true, -1, 1e300, "x", []any{}, map[string]any{}}[int(g.next())%7]
	}
	if s.Const != nil {
		return s.Const
	}
	if len(s.Enum) > 0 {
		return s.Enum[int(g.next())%len(s.Enum)]
	}
	if len(s.OneOf) > 0 {
		return g.value(s.OneOf[int(g.next())%len(s.OneOf)], depth+1)
	}
	if len(s.AllOf) > 0 {
		return g.value(s.AllOf[0], depth+1)
	}
	typ, _ := s.Type.(string)
	if list, ok := s.Type.([]any); ok && len(list) > 0 {
		typ, _ = list[int(g.next())%len(list)].(string)
	}
	if typ == "" && s.Properties != nil {
		typ = "object"
	}
	switch typ {
	case "object":
		m := map[string]any{}
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if slices.Contains(s.Required, name) || g.next()%2 == 0 {
				m[name] = g.value(s.Properties[name], depth+1)
			}
		}
		if g.next()%8 == 0 {
			m[g.text()] = g.text()
		}
		return m
	case "array":
		n := int(g.next() % 4)
		a := make([]any, 0, n)
		for range n {
			a = append(a, g.value(s.Items, depth+1))
		}
		return a
	case "string":
		return g.text()
	case "integer":
		return int64(int8(g.next())) * int64(g.next())
	case "number":
		return float64(int8(g.next())) / 3
	case "boolean":
		return g.next()%2 == 0
	case "null":
		return nil
	default: // any JSON value
		switch g.next() % 4 {
		case 0:
			return g.text()
		case 1:
			return map[string]any{"n": int(g.next())}
		case 2:
			return nil
		default:
			return []any{g.text()}
		}
	}
}
