package node

import (
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
)

// Questions about a saved definition's document that the API answers
// without running anything.

// CanonicalDefinition returns a saved definition in its canonical JSON
// form. A saved version parsed when it was saved; it is read with the
// rules of its save, which may have been fewer than today's.
func CanonicalDefinition(d *weft.Definition) ([]byte, error) {
	def, err := definition.ParseSaved(d.Source)
	if err != nil {
		return nil, err
	}
	return def.Canonical(), nil
}

// StepRef names one step of a definition: its path (steps[1].then[0]) and
// its id.
type StepRef struct {
	Path string
	ID   string
}

// DefinitionSteps lists a saved definition's steps, in document order.
func DefinitionSteps(d *weft.Definition) ([]StepRef, error) {
	def, err := definition.ParseSaved(d.Source)
	if err != nil {
		return nil, err
	}
	var steps []StepRef
	def.Walk(func(path string, st *definition.Step) bool {
		steps = append(steps, StepRef{Path: path, ID: st.ID})
		return true
	})
	return steps, nil
}

// CheckEventName reports an event name that no wait step could name, as a
// definition's validation would.
func CheckEventName(name string) error { return definition.CheckEventName(name) }
