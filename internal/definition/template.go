package definition

import "github.com/weftworks/weft/host/weft"

// CompileValue compiles a value written outside a workflow definition
// (a schedule's input) with the expression language of definitions: src
// is the decoded YAML or JSON, path names where it sits in its document,
// and names are the variables its expressions may read, bound at
// evaluation in Env.Locals. The problems name their paths as a
// definition's do.
func CompileValue(src any, path string, names ...string) (Value, []weft.Problem) {
	c := compiler{scope: names}
	v := c.value(src, path, wantAny)
	return v, c.problems
}
