package store

import (
	"encoding/json"
	"fmt"
)

// Limits shared by every implementation.
const (
	// MaxIDLen bounds instance, stimulus and timer ids, and definition and
	// plugin names, in bytes.
	MaxIDLen = 256
	// DefaultListLimit is the page size of a list whose limit is not
	// positive.
	DefaultListLimit = 100
	// MaxListLimit bounds every page.
	MaxListLimit = 1000
)

// ClampLimit returns the page size for a requested limit: DefaultListLimit
// when n is not positive, at most MaxListLimit.
func ClampLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultListLimit
	case n > MaxListLimit:
		return MaxListLimit
	}
	return n
}

// CheckID reports an empty or too long id or name; what names the field in
// the message.
func CheckID(what, id string) error {
	if id == "" {
		return Invalid("%s must not be empty", what)
	}
	if len(id) > MaxIDLen {
		return Invalid("%s is %d bytes, more than %d", what, len(id), MaxIDLen)
	}
	return nil
}

func checkJSON(what string, v json.RawMessage) error {
	if len(v) > 0 && !json.Valid(v) {
		return Invalid("%s is not valid JSON", what)
	}
	return nil
}

// Validate reports what is malformed in c, naming the field; the error
// matches ErrInvalid. Implementations call it before writing.
func (c Commit) Validate() error {
	in := c.Instance
	if in == nil {
		return Invalid("commit without an instance")
	}
	if err := CheckID("instance id", in.ID); err != nil {
		return err
	}
	if in.Workflow == "" {
		return Invalid("instance %q: workflow must not be empty", in.ID)
	}
	if !in.Status.Valid() {
		return Invalid("instance %q: unknown status %q", in.ID, in.Status)
	}
	for _, f := range []struct {
		what string
		v    json.RawMessage
	}{{"input", in.Input}, {"output", in.Output}, {"vars", in.Vars}} {
		if err := checkJSON(fmt.Sprintf("instance %q: %s", in.ID, f.what), f.v); err != nil {
			return err
		}
	}
	if in.Error != nil {
		if err := checkJSON(fmt.Sprintf("instance %q: error.details", in.ID), in.Error.Details); err != nil {
			return err
		}
	}
	for name, version := range in.Plugins {
		if name == "" || version == "" {
			return Invalid("instance %q: plugin pin %q=%q needs a name and a version", in.ID, name, version)
		}
	}
	if l := in.Lease; l.Node == "" && (l.Boot != "" || !l.Expiry.IsZero()) {
		return Invalid("instance %q: lease without a node", in.ID)
	} else if l.Node != "" && l.Expiry.IsZero() {
		return Invalid("instance %q: lease of node %q without an expiry", in.ID, l.Node)
	}
	for i, e := range c.History {
		if e.Type == "" {
			return Invalid("instance %q: history[%d].type must not be empty", in.ID, i)
		}
		if err := checkJSON(fmt.Sprintf("instance %q: history[%d].data", in.ID, i), e.Data); err != nil {
			return err
		}
	}
	for i, b := range c.Bookmarks {
		if b.InstanceID != "" && b.InstanceID != in.ID {
			return Invalid("instance %q: bookmarks[%d] is for instance %q", in.ID, i, b.InstanceID)
		}
		if b.Event == "" {
			return Invalid("instance %q: bookmarks[%d].event must not be empty", in.ID, i)
		}
	}
	seen := make(map[string]bool, len(c.Timers))
	for i, t := range c.Timers {
		if t.InstanceID != "" && t.InstanceID != in.ID {
			return Invalid("instance %q: timers[%d] is for instance %q", in.ID, i, t.InstanceID)
		}
		if err := CheckID(fmt.Sprintf("instance %q: timers[%d].id", in.ID, i), t.ID); err != nil {
			return err
		}
		if seen[t.ID] {
			return Invalid("instance %q: timers[%d].id %q is not unique", in.ID, i, t.ID)
		}
		seen[t.ID] = true
		if t.Due.IsZero() {
			return Invalid("instance %q: timers[%d].due must be set", in.ID, i)
		}
		if err := checkJSON(fmt.Sprintf("instance %q: timers[%d].data", in.ID, i), t.Data); err != nil {
			return err
		}
	}
	if c.DeliveredStimulus == "" && len(c.DeliveredOutcome) > 0 {
		return Invalid("instance %q: delivered outcome without a delivered stimulus", in.ID)
	}
	return checkJSON(fmt.Sprintf("instance %q: delivered outcome", in.ID), c.DeliveredOutcome)
}

// Validate reports what is malformed in a stimulus to enqueue; the error
// matches ErrInvalid.
func (s Stimulus) Validate() error {
	if err := CheckID("stimulus id", s.ID); err != nil {
		return err
	}
	if s.Name == "" {
		return Invalid("stimulus %q: name must not be empty", s.ID)
	}
	if s.ExpiresAt.IsZero() {
		return Invalid("stimulus %q: expires_at must be set", s.ID)
	}
	return checkJSON(fmt.Sprintf("stimulus %q: payload", s.ID), s.Payload)
}

// Validate reports what is malformed in a plugin record to store; the
// error matches ErrInvalid.
func (r PluginRecord) Validate() error {
	if err := CheckID("plugin name", r.Name); err != nil {
		return err
	}
	if r.Version == "" {
		return Invalid("plugin %q: version must not be empty", r.Name)
	}
	if r.Size < 0 {
		return Invalid("plugin %q: negative size", r.Name)
	}
	return nil
}
