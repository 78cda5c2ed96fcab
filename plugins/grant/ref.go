package grant

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Ref is a reference to a secret: where each node finds its value. The
// value itself is never stored.
type Ref struct {
	// Kind is "env" (an environment variable of the host process) or
	// "file" (a file's content, without trailing newlines, as container
	// platforms mount secrets).
	Kind string
	// Name is the variable's name or the file's absolute path.
	Name string
}

// Reference kinds.
const (
	RefEnv  = "env"
	RefFile = "file"
)

// ParseRef parses "env:NAME" or "file:/absolute/path". Its errors never
// quote s, which may be a secret's value written where its reference
// belongs.
func ParseRef(s string) (Ref, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" || (kind != RefEnv && kind != RefFile) {
		return Ref{}, fmt.Errorf("the reference is not env:NAME or file:/path (a secret's value is never stored, only where each node finds it)")
	}
	switch kind {
	case RefEnv:
		for i := 0; i < len(name); i++ {
			c := name[i]
			if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
				return Ref{}, fmt.Errorf("the reference is env: and a name of letters, digits and '_'")
			}
		}
	case RefFile:
		if !filepath.IsAbs(name) || filepath.Clean(name) != name {
			return Ref{}, fmt.Errorf("the reference is file: and an absolute, clean path")
		}
	}
	return Ref{Kind: kind, Name: name}, nil
}

// String returns the reference as written.
func (r Ref) String() string { return r.Kind + ":" + r.Name }
