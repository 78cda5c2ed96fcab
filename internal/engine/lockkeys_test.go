package engine_test

import (
	"slices"
	"testing"

	"github.com/weftworks/weft/internal/engine"
)

func TestInstanceLockKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ id, want string }{
		{"wf-1", "workflow-instance:wf-1"},
		{"01J9ZQ:x", "workflow-instance:01J9ZQ:x"},
		{"", "workflow-instance:"},
	}
	for _, tt := range tests {
		if got := engine.InstanceLockKey(tt.id); got != tt.want {
			t.Errorf("InstanceLockKey(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestRefreshLockKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{"Nil", nil, "workflow-definitions-refresh:all"},
		{"Empty", []string{}, "workflow-definitions-refresh:all"},
		{"One", []string{"billing"}, "workflow-definitions-refresh:billing"},
		{"Sorted", []string{"b", "c", "a"}, "workflow-definitions-refresh:a,b,c"},
		{"Duplicates", []string{"b", "a", "b"}, "workflow-definitions-refresh:a,b"},
		{"NamedAll", []string{"all"}, "workflow-definitions-refresh:all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := slices.Clone(tt.names)
			if got := engine.RefreshLockKey(tt.names); got != tt.want {
				t.Errorf("RefreshLockKey(%q) = %q, want %q", tt.names, got, tt.want)
			}
			if !slices.Equal(in, tt.names) {
				t.Errorf("RefreshLockKey modified its argument: %q, was %q", tt.names, in)
			}
		})
	}
	if engine.RefreshLockKey(nil) != engine.RefreshAllLockKey {
		t.Errorf("RefreshAllLockKey = %q, RefreshLockKey(nil) = %q", engine.RefreshAllLockKey, engine.RefreshLockKey(nil))
	}
}
