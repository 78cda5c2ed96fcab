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

// ParseRef parses "env:NAME" or "file:/absolute/path".
func ParseRef(s string) (Ref, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return Ref{}, fmt.Errorf("reference %q is not env:NAME or file:/path (a secret's value is never stored, only where to find it)", s)
	}
	switch kind {
	case RefEnv:
		for i := 0; i < len(name); i++ {
			c := name[i]
			if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
				return Ref{}, fmt.Errorf("reference %q: an environment variable's name is letters, digits and '_'", s)
			}
		}
	case RefFile:
		if !filepath.IsAbs(name) || filepath.Clean(name) != name {
			return Ref{}, fmt.Errorf("reference %q: the path must be absolute and clean", s)
		}
	default:
		return Ref{}, fmt.Errorf("reference %q: the kind is env or file, not %q", s, kind)
	}
	return Ref{Kind: kind, Name: name}, nil
}

// String returns the reference as written.
func (r Ref) String() string { return r.Kind + ":" + r.Name }
