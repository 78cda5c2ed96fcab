package store

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins/grant"
)

// MaxMessageIDLen bounds message ids, in bytes: more than weft.MaxIDLen,
// so that an id made of others ("stimulus:" + stimulus id + ":" + token,
// "child:" + instance id) fits.
const MaxMessageIDLen = 1024

func checkID(what, id string, maxLen int) error {
	return checkIDOf(id, maxLen, func() string { return what })
}

// checkIDOf is checkID naming the field with what(), called only when id
// is refused: a commit checks dozens of fields, and formatting each name
// first cost more than the checks.
func checkIDOf(id string, maxLen int, what func() string) error {
	if id == "" {
		return Invalid("%s must not be empty", what())
	}
	if len(id) > maxLen {
		return Invalid("%s is %d bytes, more than %d", what(), len(id), maxLen)
	}
	return nil
}

// The times an index can order: Unix nanoseconds in an int64, the key
// encoding of both implementations.
var (
	minIndexTime = time.Unix(0, math.MinInt64)
	maxIndexTime = time.Unix(0, math.MaxInt64)
)

// checkJSON reports v when it is not JSON, naming it with what(), called
// only then (see checkIDOf). It accepts what json.Valid accepts, at about
// twice its speed (jsontext's validation): a commit checks the instance's
// documents, which may be megabytes, every time.
func checkJSON(v json.RawMessage, what func() string) error {
	if len(v) > 0 && !jsontext.Value(v).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) {
		return Invalid("%s is not valid JSON", what())
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
	if err := weft.CheckID("instance id", in.ID); err != nil {
		return err
	}
	if in.Workflow == "" {
		return Invalid("instance %q: workflow must not be empty", in.ID)
	}
	if !in.Status.Valid() {
		return Invalid("instance %q: unknown status %q", in.ID, in.Status)
	}
	if c.Catalog != "" && in.Rev != 0 {
		return Invalid("instance %q: only a create carries a catalog generation, not a commit at revision %d", in.ID, in.Rev)
	}
	for _, f := range []struct {
		what string
		v    json.RawMessage
	}{{"input", in.Input}, {"output", in.Output}, {"vars", in.Vars}} {
		if err := checkJSON(f.v, func() string { return fmt.Sprintf("instance %q: %s", in.ID, f.what) }); err != nil {
			return err
		}
	}
	if in.Error != nil {
		if err := checkJSON(in.Error.Details, func() string { return fmt.Sprintf("instance %q: error.details", in.ID) }); err != nil {
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
	if !in.DeleteAfter.IsZero() {
		if !in.Status.Terminal() {
			return Invalid("instance %q: delete_after is set on a %s instance; only a finished one may expire", in.ID, in.Status)
		}
		if in.DeleteAfter.Before(minIndexTime) || in.DeleteAfter.After(maxIndexTime) {
			return Invalid("instance %q: delete_after %s is outside the years 1678 to 2262 that the store indexes", in.ID, in.DeleteAfter.UTC().Format(time.RFC3339))
		}
	}
	for i, e := range c.History {
		if e.Type == "" {
			return Invalid("instance %q: history[%d].type must not be empty", in.ID, i)
		}
		if err := checkJSON(e.Data, func() string { return fmt.Sprintf("instance %q: history[%d].data", in.ID, i) }); err != nil {
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
		if err := checkIDOf(t.ID, weft.MaxIDLen, func() string { return fmt.Sprintf("instance %q: timers[%d].id", in.ID, i) }); err != nil {
			return err
		}
		if seen[t.ID] {
			return Invalid("instance %q: timers[%d].id %q is not unique", in.ID, i, t.ID)
		}
		seen[t.ID] = true
		if t.Due.IsZero() {
			return Invalid("instance %q: timers[%d].due must be set", in.ID, i)
		}
		if err := checkJSON(t.Data, func() string { return fmt.Sprintf("instance %q: timers[%d].data", in.ID, i) }); err != nil {
			return err
		}
	}
	if c.DeliveredStimulus == "" && len(c.DeliveredOutcome) > 0 {
		return Invalid("instance %q: delivered outcome without a delivered stimulus", in.ID)
	}
	if err := checkJSON(c.DeliveredOutcome, func() string { return fmt.Sprintf("instance %q: delivered outcome", in.ID) }); err != nil {
		return err
	}
	for i, id := range c.Consumed {
		if err := checkIDOf(id, MaxMessageIDLen, func() string { return fmt.Sprintf("instance %q: consumed[%d]", in.ID, i) }); err != nil {
			return err
		}
	}
	for i, m := range c.Send {
		if err := validateMessage(m, fmt.Sprintf("instance %q: send[%d]", in.ID, i)); err != nil {
			return err
		}
	}
	if sc := c.Slot; sc != nil {
		switch {
		case sc.Key == "" || len(sc.Key) > MaxSlotKeyLen:
			return Invalid("instance %q: slot key %q: want 1 to %d bytes", in.ID, sc.Key, MaxSlotKeyLen)
		case sc.Op == nil:
			return Invalid("instance %q: slot change on %q without an operation", in.ID, sc.Key)
		}
		if err := weft.CheckID("slot holder id", sc.ID); err != nil {
			return err
		}
	}
	return nil
}

// ValidateMessage reports what is malformed in a message to write to an inbox:
// InstanceID (at most MaxIDLen bytes), ID (at most MaxMessageIDLen) and
// Kind are required, Payload must be JSON. The store sets Seq and
// CreatedAt. The error matches ErrInvalid.
func ValidateMessage(m weft.Message) error { return validateMessage(m, "message") }

func validateMessage(m weft.Message, what string) error {
	if err := weft.CheckID(what+": instance id", m.InstanceID); err != nil {
		return err
	}
	if err := checkID(what+": id", m.ID, MaxMessageIDLen); err != nil {
		return err
	}
	if m.Kind == "" {
		return Invalid("%s %q: kind must not be empty", what, m.ID)
	}
	return checkJSON(m.Payload, func() string { return fmt.Sprintf("%s %q: payload", what, m.ID) })
}

// ValidateDeliver reports what is malformed in the arguments of
// Store.Deliver: s, when not nil, as for EnqueueStimulus (ID, Name and
// ExpiresAt required) with an Outcome that is JSON, and every message as
// ValidateMessage says. The error matches ErrInvalid.
func ValidateDeliver(s *weft.Stimulus, msgs []weft.Message) error {
	if s != nil {
		if err := ValidateStimulus(*s); err != nil {
			return err
		}
		if err := checkJSON(s.Outcome, func() string { return fmt.Sprintf("stimulus %q: outcome", s.ID) }); err != nil {
			return err
		}
	}
	for i, m := range msgs {
		if err := validateMessage(m, fmt.Sprintf("messages[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// ValidateStimulus reports what is malformed in a stimulus to enqueue; the
// error matches ErrInvalid.
func ValidateStimulus(s weft.Stimulus) error {
	if err := weft.CheckID("stimulus id", s.ID); err != nil {
		return err
	}
	if s.Name == "" {
		return Invalid("stimulus %q: name must not be empty", s.ID)
	}
	if s.ExpiresAt.IsZero() {
		return Invalid("stimulus %q: expires_at must be set", s.ID)
	}
	return checkJSON(s.Payload, func() string { return fmt.Sprintf("stimulus %q: payload", s.ID) })
}

// ValidatePluginRecord reports what is malformed in a plugin record to
// store; the error matches weft.ErrInvalid.
func ValidatePluginRecord(r weft.PluginRecord) error {
	if err := weft.CheckID("plugin name", r.Name); err != nil {
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

// CheckPluginName reports a plugin name that abi.ValidName refuses; the
// error matches ErrInvalid. The grants methods of a Store check their name
// with it.
func CheckPluginName(name string) error {
	if abi.ValidName(name) {
		return nil
	}
	if len(name) > 2*abi.MaxNameLen {
		return Invalid("plugin name of %d bytes: at most %d characters from a-z, 0-9, '_' and '-', starting with a letter",
			len(name), abi.MaxNameLen)
	}
	return Invalid("plugin name %q: 1 to %d characters from a-z, 0-9, '_' and '-', starting with a letter",
		name, abi.MaxNameLen)
}

// ValidateGrants reports what is malformed in the arguments of
// Store.PutGrants: a plugin name CheckPluginName refuses, or a document
// that is empty or longer than grant.MaxDocument bytes. It does not look
// inside the document. The error matches ErrInvalid.
func ValidateGrants(plugin string, doc []byte) error {
	if err := CheckPluginName(plugin); err != nil {
		return err
	}
	if len(doc) == 0 {
		return Invalid("grants of plugin %q: the document is empty", plugin)
	}
	if len(doc) > grant.MaxDocument {
		return Invalid("grants of plugin %q: the document has %d bytes, more than %d", plugin, len(doc), grant.MaxDocument)
	}
	return nil
}
