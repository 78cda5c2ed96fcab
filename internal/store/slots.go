package store

import (
	"time"

	"github.com/weftworks/weft/internal/slots"
)

// MaxSlotKeyLen bounds a key of concurrency slots: the engine scopes a
// definition's key (up to weft.MaxFairnessKey bytes) by its workflow's or
// step's name.
const MaxSlotKeyLen = 1024

// SlotOp is an operation of internal/slots on a key's State, as
// Store.UpdateSlots applies it: slots.Acquire, slots.Release and
// slots.Renew are SlotOps; ExpireSlots makes slots.Expire one.
type SlotOp func(st slots.State, id string, p slots.Params, now time.Time) (slots.State, slots.Decision, error)

// ExpireSlots is slots.Expire as a SlotOp: it ignores the id.
func ExpireSlots(st slots.State, _ string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
	return slots.Expire(st, p, now)
}

// SlotKey is what Store.SlotKeys shows of one key of concurrency slots.
type SlotKey struct {
	// Key is the key, as the engine names it (docs/flow-control.md).
	Key string `json:"key"`
	// Limit and Policy are those of the last UpdateSlots of the key: the
	// terms in force for a sweep that acts on the key without a caller's.
	Limit  int          `json:"limit"`
	Policy slots.Policy `json:"policy"`
	// Holders hold the key's slots, in the order they were granted.
	Holders []slots.Holder `json:"holders,omitempty"`
	// Waiting is the length of the line, and OldestWait the Since of its
	// first waiter (zero when nobody waits).
	Waiting    int       `json:"waiting"`
	OldestWait time.Time `json:"oldest_wait,omitzero"`
}
