package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
)

// operation is one operation of the OpenAPI document.
type operation struct {
	method, path string // path in OpenAPI form: /v1/plugins/{name}
	role         string // x-weft-role
	body         bool   // it has a requestBody
	// responses maps each documented status (or "default") to its
	// response's $ref, "" for one given inline.
	responses map[string]string
	params    []parameter        // path and query parameters
	bodies    map[string]*schema // the request body's media types and schemas
}

// parameter is a path or query parameter of an operation.
type parameter struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

// schema is the part of a JSON schema that FuzzAPI's body generator
// follows.
type schema struct {
	Ref                  string             `json:"$ref"`
	Type                 any                `json:"type"` // a name or a list of names
	Enum                 []any              `json:"enum"`
	Const                any                `json:"const"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	Items                *schema            `json:"items"`
	OneOf                []*schema          `json:"oneOf"`
	AllOf                []*schema          `json:"allOf"`
	AdditionalProperties any                `json:"additionalProperties"`
}

// documented reads the operations of the served document's source.
func documented(t testing.TB) []operation {
	ops, _ := documentedWithSchemas(t)
	return ops
}

// documentedWithSchemas is documented with the document's component
// schemas, by name.
func documentedWithSchemas(t testing.TB) ([]operation, map[string]*schema) {
	t.Helper()
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Role        string      `json:"x-weft-role"`
			Parameters  []parameter `json:"parameters"`
			RequestBody *struct {
				Content map[string]struct {
					Schema *schema `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Ref string `json:"$ref"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]*schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	var ops []operation
	for path, methods := range doc.Paths {
		for m, op := range methods {
			if op.Role == "" {
				t.Fatalf("%s %s has no x-weft-role", m, path)
			}
			o := operation{method: strings.ToUpper(m), path: path, role: op.Role, body: op.RequestBody != nil,
				responses: map[string]string{}, params: op.Parameters, bodies: map[string]*schema{}}
			for code, r := range op.Responses {
				o.responses[code] = r.Ref
			}
			if op.RequestBody != nil {
				for mt, c := range op.RequestBody.Content {
					o.bodies[mt] = c.Schema
				}
			}
			ops = append(ops, o)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].path+ops[i].method < ops[j].path+ops[j].method })
	return ops, doc.Components.Schemas
}

// concrete fills a path's parameters with ids that do not exist.
func concrete(path string) string {
	r := strings.NewReplacer("{name}", "nope", "{id}", "nope")
	return r.Replace(path)
}

// TestAuthMatrix sends every documented operation without a token, with a
// wrong one and with each role's, and checks 401, 403 or admission against
// the operation's documented role: the document and the enforcement agree.
func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	rank := map[string]int{"none": 0, "reader": 1, "operator": 2, "admin": 3}
	callers := []struct {
		name, token string
		rank        int // the caller's role rank; -1 for no valid token
	}{
		{"no token", "", -1},
		{"wrong token", "not-a-token", -1},
		{"reader", readerSecret, rank["reader"]},
		{"operator", operatorSecret, rank["operator"]},
		{"admin", adminSecret, rank["admin"]},
	}
	ops := documented(t)
	if len(ops) < 20 {
		t.Fatalf("only %d documented operations", len(ops))
	}
	for _, op := range ops {
		for _, c := range callers {
			t.Run(op.method+" "+op.path+" "+c.name, func(t *testing.T) {
				t.Parallel()
				need := rank[op.role]
				r := h.request(op.method, concrete(op.path), c.token, "", nil)
				switch {
				case need == 0 || (c.rank >= need):
					if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
						t.Fatalf("refused with %d: %s", r.status, r.body)
					}
				case c.rank < 0:
					r.want(t, http.StatusUnauthorized).problem(t)
					if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
						t.Fatalf("WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
					}
				default:
					p := r.want(t, http.StatusForbidden).problem(t)
					if !strings.Contains(p.Detail, op.role) {
						t.Fatalf("403 detail does not name the role needed: %q", p.Detail)
					}
				}
			})
		}
	}
}

// TestAuthOff: with no token configured every route admits requests
// without one.
func TestAuthOff(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{})
	for _, op := range documented(t) {
		if r := h.request(op.method, concrete(op.path), "", "", nil); r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
			t.Fatalf("%s %s refused with auth off: %d", op.method, op.path, r.status)
		}
	}
}

// TestTokenValidation: New refuses bad tokens, naming them.
func TestTokenValidation(t *testing.T) {
	t.Parallel()
	h := newHost(t) // for a node
	for _, tc := range []struct {
		name   string
		tokens []api.Token
		want   string
	}{
		{"unknown role", []api.Token{{Name: "ci", Role: "root", Token: "x"}}, `auth token "ci": role must be admin, operator or reader, got "root"`},
		{"short hash", []api.Token{{Name: "ci", Role: api.RoleAdmin, Token: "sha256:abcd"}}, `auth token "ci": "sha256:" must be followed by the 64 hex digits`},
		{"hash not hex", []api.Token{{Name: "ci", Role: api.RoleAdmin, Token: "sha256:" + strings.Repeat("z", 64)}}, `auth token "ci": "sha256:"`},
		{"empty secret", []api.Token{{Name: "ci", Role: api.RoleAdmin}}, `auth token "ci": token must not be empty`},
		{"no name", []api.Token{{Role: api.RoleAdmin, Token: "x"}}, `auth token 0: name must not be empty`},
		{"twice", []api.Token{{Name: "ci", Role: api.RoleAdmin, Token: "x"}, {Name: "ci", Role: api.RoleReader, Token: "y"}}, `auth token "ci": name used twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := api.New(api.Config{Tokens: tc.tokens}, h.node)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\"x\"") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}
