package definition

import (
	"fmt"
	"slices"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/weftworks/weft/internal/jsonv"
)

// uses is what an expression reads of its environment: the documents
// (*jsonv.Doc) among them are decoded before the expression machine runs,
// and only those.
type uses struct {
	input bool
	// vars are the variables read by name (vars.x, vars["x"]); allVars
	// is set when vars is read otherwise (whole, or by a computed name).
	vars    []string
	allVars bool
}

// usesOf returns what prog reads.
func usesOf(prog *vm.Program) uses {
	var u uses
	named := 0
	total := 0
	ast.Find(prog.Node(), func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IdentifierNode:
			switch n.Value {
			case "input":
				u.input = true
			case "vars":
				total++
			}
		case *ast.MemberNode:
			if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "vars" {
				if s, ok := n.Property.(*ast.StringNode); ok && !n.Method {
					named++
					if !slices.Contains(u.vars, s.Value) {
						u.vars = append(u.vars, s.Value)
					}
				}
			}
		}
		return false
	})
	u.allVars = total > named
	return u
}

// decoded returns env with the documents the expression reads decoded:
// env itself when it reads none, a copy otherwise (env is shared by the
// values of one evaluation).
func (u uses) decoded(env map[string]any) (map[string]any, error) {
	in, inDoc := env["input"].(*jsonv.Doc)
	inDoc = inDoc && u.input
	vars, _ := env["vars"].(map[string]any)
	varDocs := false
	if u.allVars {
		for _, x := range vars {
			if _, ok := x.(*jsonv.Doc); ok {
				varDocs = true
				break
			}
		}
	} else {
		for _, name := range u.vars {
			if _, ok := vars[name].(*jsonv.Doc); ok {
				varDocs = true
				break
			}
		}
	}
	if !inDoc && !varDocs {
		return env, nil
	}
	out := make(map[string]any, len(env))
	for k, x := range env {
		out[k] = x
	}
	if inDoc {
		x, err := in.Value()
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		out["input"] = x
	}
	if varDocs {
		m := make(map[string]any, len(vars))
		for k, x := range vars {
			m[k] = x
		}
		decode := func(name string) error {
			d, ok := m[name].(*jsonv.Doc)
			if !ok {
				return nil
			}
			x, err := d.Value()
			if err != nil {
				return fmt.Errorf("vars.%s: %w", name, err)
			}
			m[name] = x
			return nil
		}
		if u.allVars {
			for name := range m {
				if err := decode(name); err != nil {
					return nil, err
				}
			}
		} else {
			for _, name := range u.vars {
				if err := decode(name); err != nil {
					return nil, err
				}
			}
		}
		out["vars"] = m
	}
	return out, nil
}

// plain returns x decoded when it is a document, for what computes on
// values (a condition, a template, a typed value); src names the value
// in the error.
func plain(x any, src any) (any, error) {
	d, ok := x.(*jsonv.Doc)
	if !ok {
		return x, nil
	}
	v, err := d.Value()
	if err != nil {
		return nil, &EvalError{Source: sourceString(src), Err: err}
	}
	return v, nil
}

// pathOfProgram returns the path of names from input or vars that prog
// is, or nil when it is anything else. A path of vars must name a
// variable: `${ vars }` itself is a map of documents, which the machine
// yields decoded.
func pathOfProgram(prog *vm.Program) *memberPath {
	p := pathOf(Value{n: exprNode{prog: prog}})
	if p != nil && p.vars && len(p.names) == 0 {
		return nil
	}
	return p
}

// readEnv reads the path from an expression environment as read does
// from an Env: true when it could, false when the machine must run the
// expression. A document the path ends at is yielded as it is; one it
// goes into is decoded, and an error is a document that does not decode.
func (p *memberPath) readEnv(env map[string]any) (any, bool, error) {
	if p == nil {
		return nil, false, nil
	}
	e := Env{Input: env["input"]}
	if v, ok := env["vars"].(map[string]any); ok {
		e.Vars = v
	}
	return p.readDocs(e)
}
