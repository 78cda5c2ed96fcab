package batch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestParseDocument: each valid document reads to its canonical form,
// which reads back to itself.
func TestParseDocument(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, canonical string
	}{
		{"cancel by query, the default rate",
			`{"op": "cancel", "query": "customer=\"acme\"  and status = \"failed\"", "reason": "bad rollout"}`,
			`{"op":"cancel","query":"customer = \"acme\" AND status = \"failed\"","reason":"bad rollout","rate":1000}`},
		{"ids, no limit, held",
			`{"ids": ["a", "b"], "op": "pause", "rate": 0, "hold": true}`,
			`{"op":"pause","ids":["a","b"],"rate":0,"hold":true}`},
		{"a slow rate",
			`{"op": "resume", "ids": ["a"], "rate": 0.25}`,
			`{"op":"resume","ids":["a"],"rate":0.25}`},
		{"nulls are absent, false is left out",
			`{"op": "delete", "ids": ["a"], "reason": null, "rate": null, "hold": false, "dry_run": null, "args": null}`,
			`{"op":"delete","ids":["a"],"rate":1000}`},
		{"empty args for an op that takes none",
			`{"op": "release", "query": "workflow = \"w\"", "args": {}}`,
			`{"op":"release","query":"workflow = \"w\"","rate":1000}`},
		{"signal with a payload in one form",
			`{"op": "signal", "query": "status = \"suspended\"", "args": {"payload": {"z": [1.50, 2], "a": "<x>"}, "key": "k", "event": "order.paid"}}`,
			`{"op":"signal","query":"status = \"suspended\"","rate":1000,"args":{"event":"order.paid","key":"k","payload":{"a":"<x>","z":[1.50,2]}}}`},
		{"signal with a payload beyond float64, passed whole",
			`{"op": "signal", "ids": ["x"], "args": {"event": "go", "payload": {"n": 1e400}}}`,
			`{"op":"signal","ids":["x"],"rate":1000,"args":{"event":"go","payload":{"n":1e400}}}`},
		{"signal without key or payload",
			`{"op": "signal", "ids": ["x"], "args": {"event": "go"}}`,
			`{"op":"signal","ids":["x"],"rate":1000,"args":{"event":"go"}}`},
		{"migrate dry run",
			`{"op": "migrate", "query": "status = \"failed\"", "dry_run": true, "args": {"to_version": 3, "plugins": {"pay": "` + sha + `"}, "retry": true}}`,
			`{"op":"migrate","query":"status = \"failed\"","rate":1000,"dry_run":true,"args":{"to_version":3,"plugins":{"pay":"` + sha + `"},"retry":true}}`},
		{"migrate to the latest",
			`{"op": "migrate", "ids": ["a"], "args": {"resume": true, "retry": false}}`,
			`{"op":"migrate","ids":["a"],"rate":1000,"args":{"resume":true}}`},
		{"reset",
			`{"op": "reset", "ids": ["a"], "args": {"step": "charge-card"}}`,
			`{"op":"reset","ids":["a"],"rate":1000,"args":{"step":"charge-card"}}`},
		{"a query as written, unescaped",
			`{"op": "cancel", "query": "amount >= 100 and amount < 2000 and name != \"a&b\""}`,
			`{"op":"cancel","query":"amount >= 100 AND amount < 2000 AND name != \"a&b\"","rate":1000}`},
		{"retry, surrounded by whitespace",
			"\n {\"op\": \"retry\", \"query\": \"id STARTS_WITH \\\"o-\\\"\"}\n\t",
			`{"op":"retry","query":"id STARTS_WITH \"o-\"","rate":1000}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := ParseDocument([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			canon := d.Canonical()
			if string(canon) != tt.canonical {
				t.Errorf("canonical\n got %s\nwant %s", canon, tt.canonical)
			}
			again, err := ParseDocument(canon)
			if err != nil {
				t.Fatalf("the canonical form does not parse: %v", err)
			}
			if c2 := again.Canonical(); string(c2) != string(canon) {
				t.Errorf("canonical forms differ:\n%s\n%s", canon, c2)
			}
			if err := d.Validate(); err != nil {
				t.Errorf("Validate of a parsed document: %v", err)
			}
		})
	}
}

// TestParseDocumentFields: the fields land where the engine reads them,
// and an absent rate differs from no limit.
func TestParseDocumentFields(t *testing.T) {
	t.Parallel()
	d, err := ParseDocument([]byte(`{"op": "migrate", "ids": ["a", "b"], "reason": "r", "hold": true, "dry_run": true,
		"args": {"to_version": 2, "plugins": {"pay": "` + sha + `"}, "retry": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Op != weft.BatchMigrate || len(d.IDs) != 2 || d.Reason != "r" || !d.Hold || !d.DryRun || d.Rate != nil ||
		d.Args.ToVersion != 2 || d.Args.Plugins["pay"] != sha || !d.Args.Retry || d.Args.Resume {
		t.Errorf("document = %+v", d)
	}
	for doc, want := range map[string]float64{
		`{"op": "cancel", "ids": ["a"]}`:            DefaultRate,
		`{"op": "cancel", "ids": ["a"], "rate": 0}`: 0,
		`{"op": "cancel", "ids": ["a"], "rate": 5}`: 5,
	} {
		d, err := ParseDocument([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Limit(); got != want {
			t.Errorf("%s: Limit = %v, want %v", doc, got, want)
		}
	}
}

// TestParseDocumentRefuses: each problem is named with its path, with the
// others of the same document.
func TestParseDocumentRefuses(t *testing.T) {
	t.Parallel()
	ids := func(n int, f func(i int) string) string {
		s := make([]string, n)
		for i := range s {
			s[i] = `"` + f(i) + `"`
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	tests := []struct {
		name, doc string
		want      []string // "path: message part", each
	}{
		{"empty", ``, []string{": the document is empty"}},
		{"not JSON", `{"op": }`, []string{": not JSON: invalid character '}'"}},
		{"cut short", `{"op": "cancel"`, []string{": not JSON: it ends too early"}},
		{"two values", `{} {}`, []string{": more than one JSON value"}},
		{"a list", `[1]`, []string{": want a JSON object, not [1]"}},
		{"too large", `{"op": "cancel", "reason": "` + strings.Repeat("x", MaxDocument) + `"}`, []string{": the document is 4194334 bytes, more than 4194304"}},
		{"no op, no selection", `{}`, []string{"op: is required: one of cancel, retry", ": give query (an instance query) or ids"}},
		{"unknown op", `{"op": "kill", "ids": ["a"]}`, []string{`op: unknown operation "kill"; want one of cancel`}},
		{"op not a string", `{"op": 1, "ids": ["a"]}`, []string{"op: want a string, not 1"}},
		{"unknown field", `{"op": "cancel", "ids": ["a"], "why": "x"}`, []string{"why: unknown field; the fields here are op, query, ids"}},
		{"field twice", `{"op": "cancel", "op": "pause", "ids": ["a"]}`, []string{"op: appears twice"}},
		{"both selections", `{"op": "cancel", "ids": ["a"], "query": "id = \"a\""}`, []string{": both query and ids are given"}},
		{"query syntax", `{"op": "cancel", "query": "status = \"failed\" andd x = 1"}`, []string{`query: at 18 ("andd"): expected AND, OR or the end of the query`}},
		{"query empty", `{"op": "cancel", "query": ""}`, []string{"query: at 0: the query is empty"}},
		{"query not a string", `{"op": "cancel", "query": ["a"]}`, []string{`query: want a string, not ["a"]`}},
		{"ids empty", `{"op": "cancel", "ids": []}`, []string{"ids: is empty: want at least one instance id"}},
		{"ids not a list", `{"op": "cancel", "ids": "a"}`, []string{`ids: want a list of instance ids, not "a"`}},
		{"an id not a string", `{"op": "cancel", "ids": ["a", 2]}`, []string{"ids[1]: want a string, not 2"}},
		{"an empty id", `{"op": "cancel", "ids": ["a", ""]}`, []string{"ids[1]: the id must not be empty"}},
		{"a long id", `{"op": "cancel", "ids": ["` + strings.Repeat("i", weft.MaxIDLen+1) + `"]}`, []string{"ids[0]: the id is 257 bytes, more than 256"}},
		{"duplicate ids", `{"op": "cancel", "ids": ["a", "b", "a", "b"]}`, []string{`ids[2]: "a" is also ids[0]`, `ids[3]: "b" is also ids[1]`}},
		{"too many ids", `{"op": "cancel", "ids": ` + ids(weft.MaxBatchIDs+1, func(i int) string { return fmt.Sprint("i", i) }) + `}`, []string{"ids: holds 10001 ids, more than 10000"}},
		{"many bad ids, listed in bounds", `{"op": "cancel", "ids": ` + ids(200, func(int) string { return "x" }) + `}`, []string{`ids[1]: "x" is also ids[0]`, ": and 150 more problems"}},
		{"reason too long", `{"op": "cancel", "ids": ["a"], "reason": "` + strings.Repeat("r", MaxReason+1) + `"}`, []string{"reason: is 1025 bytes, more than 1024"}},
		{"negative rate", `{"op": "cancel", "ids": ["a"], "rate": -1}`, []string{"rate: -1 is not a number of instances per second at least 0"}},
		{"rate not a number", `{"op": "cancel", "ids": ["a"], "rate": "fast"}`, []string{`rate: want a number of instances per second (0: no limit), not "fast"`}},
		{"rate too large", `{"op": "cancel", "ids": ["a"], "rate": 1e999}`, []string{"rate: 1e999 is too large a number"}},
		{"hold not a bool", `{"op": "cancel", "ids": ["a"], "hold": "yes"}`, []string{`hold: want true or false, not "yes"`}},
		{"dry run of a cancel", `{"op": "cancel", "ids": ["a"], "dry_run": true}`, []string{"dry_run: only a migrate has a dry run, not a cancel"}},
		{"args of an op that takes none", `{"op": "cancel", "ids": ["a"], "args": {"event": "e", "retry": false}}`,
			[]string{"args.event: not an argument of cancel, which takes none", "args.retry: not an argument of cancel, which takes none"}},
		{"args of another op", `{"op": "signal", "ids": ["a"], "args": {"event": "e", "step": "s", "to_version": 0}}`,
			[]string{"args.to_version: not an argument of signal, which takes event, key, payload", "args.step: not an argument of signal"}},
		{"unknown arg", `{"op": "signal", "ids": ["a"], "args": {"event": "e", "name": "x"}}`, []string{"args.name: unknown field; the fields here are event, key"}},
		{"args not an object", `{"op": "signal", "ids": ["a"], "args": "e"}`, []string{`args: want an object, not "e"`}},
		{"signal without event", `{"op": "signal", "ids": ["a"]}`, []string{"args.event: is required: the event to send"}},
		{"bad event name", `{"op": "signal", "ids": ["a"], "args": {"event": "paid now"}}`, []string{`args.event: invalid event name "paid now"`}},
		{"event not a string", `{"op": "signal", "ids": ["a"], "args": {"event": true}}`, []string{"args.event: want a string, not true"}},
		{"empty key", `{"op": "signal", "ids": ["a"], "args": {"event": "e", "key": ""}}`, []string{"args.key: is empty: leave it out"}},
		{"version zero", `{"op": "migrate", "ids": ["a"], "args": {"to_version": 0}}`, []string{"args.to_version: 0 is not a version, at least 1"}},
		{"version not whole", `{"op": "migrate", "ids": ["a"], "args": {"to_version": 1.5}}`, []string{"args.to_version: want a whole number, the workflow version to move to, not 1.5"}},
		{"bad plugin", `{"op": "migrate", "ids": ["a"], "args": {"plugins": {"Pay": "` + sha + `", "ship": "abc", "x": 1}}}`,
			[]string{`args.plugins.Pay: "Pay" is not a plugin name`, `args.plugins.ship: "abc" is not a plugin version: want its sha256, 64 lowercase hex digits`, "args.plugins.x: want a string, not 1"}},
		{"plugins not an object", `{"op": "migrate", "ids": ["a"], "args": {"plugins": ["pay"]}}`, []string{`args.plugins: want an object, not ["pay"]`}},
		{"retry and resume", `{"op": "migrate", "ids": ["a"], "args": {"retry": true, "resume": true}}`, []string{"args.resume: retry and resume are both set"}},
		{"reset without step", `{"op": "reset", "ids": ["a"]}`, []string{"args.step: is required: the step to run each instance again from"}},
		{"reset bad step", `{"op": "reset", "ids": ["a"], "args": {"step": "Charge"}}`, []string{`args.step: invalid step id "Charge"`}},
		{"every problem at once", `{"op": "reset", "query": "(", "reason": 3, "args": {"step": "x y", "key": "k"}, "extra": 1}`,
			[]string{"extra: unknown field", "reason: want a string, not 3", "query: at 1: expected a comparison, found the end of the query", "args.key: not an argument of reset, which takes step", `args.step: invalid step id "x y"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := ParseDocument([]byte(tt.doc))
			var e *weft.BatchError
			if !errors.As(err, &e) || !errors.Is(err, weft.ErrInvalid) || d != nil {
				t.Fatalf("ParseDocument = %v, %v; want a *weft.BatchError matching weft.ErrInvalid", d, err)
			}
			if len(e.Problems) > maxProblems {
				t.Errorf("%d problems, more than %d", len(e.Problems), maxProblems)
			}
		want:
			for _, w := range tt.want {
				for _, p := range e.Problems {
					if strings.HasPrefix(p.Path+": "+p.Message, w) {
						continue want
					}
				}
				t.Errorf("no problem %q in:\n%s", w, e)
			}
		})
	}
}

// TestParseDocumentOnce: a field that fails to decode is one problem, not
// also the rule its zero value breaks.
func TestParseDocumentOnce(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{"op": "cancel", "query": 1}`,
		`{"op": "cancel", "ids": "a"}`,
		`{"op": "cancel", "ids": [1]}`,
		`{"op": "signal", "ids": ["a"], "args": {"event": 1}}`,
		`{"op": "migrate", "ids": ["a"], "args": {"to_version": "2"}}`,
		`{"op": "reset", "ids": ["a"], "args": {"step": null, "step": 2}}`,
	} {
		_, err := ParseDocument([]byte(doc))
		var e *weft.BatchError
		if !errors.As(err, &e) || len(e.Problems) != 1 {
			t.Errorf("%s: %v, want one problem", doc, err)
		}
	}
}

// TestValidate: a document built in Go is held to ParseDocument's rules.
func TestValidate(t *testing.T) {
	t.Parallel()
	rate := func(r float64) *float64 { return &r }
	tests := []struct {
		name string
		doc  Document
		want []string // paths; none: valid
	}{
		{"cancel by ids", Document{Op: weft.BatchCancel, IDs: []string{"a"}}, nil},
		{"signal", Document{Op: weft.BatchSignal, Query: `status = "suspended"`, Args: Args{Event: "e", Payload: []byte(`{"x": 1}`)}}, nil},
		{"no op", Document{IDs: []string{"a"}}, []string{"op"}},
		{"no selection", Document{Op: weft.BatchCancel}, []string{""}},
		{"empty ids", Document{Op: weft.BatchCancel, IDs: []string{}}, []string{"ids"}},
		{"bad rate", Document{Op: weft.BatchCancel, IDs: []string{"a"}, Rate: rate(-2)}, []string{"rate"}},
		{"an arg of another op", Document{Op: weft.BatchPause, IDs: []string{"a"}, Args: Args{Step: "s"}}, []string{"args.step"}},
		{"bad payload", Document{Op: weft.BatchSignal, IDs: []string{"a"}, Args: Args{Event: "e", Payload: []byte(`{`)}}, []string{"args.payload"}},
		{"negative version", Document{Op: weft.BatchMigrate, IDs: []string{"a"}, Args: Args{ToVersion: -1}}, []string{"args.to_version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.doc.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ParseDocument(tt.doc.Canonical()); err != nil {
					t.Errorf("the canonical form %s of a valid document: %v", tt.doc.Canonical(), err)
				}
				return
			}
			var e *weft.BatchError
			if !errors.As(err, &e) {
				t.Fatalf("Validate = %v, want a *weft.BatchError", err)
			}
			var got []string
			for _, p := range e.Problems {
				got = append(got, p.Path)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("problems at %q, want %q (%v)", got, tt.want, err)
			}
		})
	}
}

// TestCanonicalOfAnInvalidDocument: Canonical writes what it can rather
// than fail.
func TestCanonicalOfAnInvalidDocument(t *testing.T) {
	t.Parallel()
	nan := 0.0
	nan /= nan
	d := Document{Op: weft.BatchSignal, Query: "(", Rate: &nan, Args: Args{Event: "e", Payload: []byte("{")}}
	if got, want := string(d.Canonical()), `{"op":"signal","query":"(","args":{"event":"e"}}`; got != want {
		t.Errorf("Canonical = %s, want %s", got, want)
	}
}

// TestAncestors: the paths a path is inside.
func TestAncestors(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"":                 "[]",
		"op":               "[]",
		"ids[3]":           "[ids]",
		"args.plugins.pay": "[args.plugins args]",
	} {
		if got := fmt.Sprint(ancestors(path)); got != want {
			t.Errorf("ancestors(%q) = %s, want %s", path, got, want)
		}
	}
}

// BenchmarkParseDocument reads the largest id list, valid and with every
// id refused.
func BenchmarkParseDocument(b *testing.B) {
	for _, tt := range []struct {
		name string
		id   func(i int) string
	}{
		{"valid", func(i int) string { return fmt.Sprintf("%q", fmt.Sprint("order-", i)) }},
		{"every id refused", func(int) string { return "1" }},
	} {
		ids := make([]string, weft.MaxBatchIDs)
		for i := range ids {
			ids[i] = tt.id(i)
		}
		doc := []byte(`{"op": "cancel", "ids": [` + strings.Join(ids, ",") + `]}`)
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				_, _ = ParseDocument(doc)
			}
		})
	}
}
