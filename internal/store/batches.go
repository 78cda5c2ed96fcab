package store

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/weftworks/weft/host/weft"
)

// The checks of the batch methods' arguments, which both implementations
// make before they write (Store.CreateBatch and the methods after it). Each
// error matches ErrInvalid and names the field.

// ValidateBatch reports what is malformed in a batch to write: its id
// must pass weft.CheckID and its State be JSON when not empty; with doc
// (CreateBatch, which writes the Document), the Document must be JSON and
// not empty. The store reads neither.
func ValidateBatch(b *weft.Batch, doc bool) error {
	if b == nil {
		return Invalid("batch must not be nil")
	}
	if err := weft.CheckID("batch id", b.ID); err != nil {
		return err
	}
	if doc {
		if len(b.Document) == 0 {
			return Invalid("batch %q: document must not be empty", b.ID)
		}
		if !json.Valid(b.Document) {
			return Invalid("batch %q: document is not valid JSON", b.ID)
		}
	}
	return checkJSON(b.State, func() string { return fmt.Sprintf("batch %q: state", b.ID) })
}

// BatchIDs checks the instance ids that CreateBatch or AddBatchItems
// appends to batch (at most weft.MaxBatchIDs, each passing weft.CheckID)
// and returns them without repeats, each at its first place.
func BatchIDs(batch string, ids []string) ([]string, error) {
	if len(ids) > weft.MaxBatchIDs {
		return nil, Invalid("batch %q: %d instance ids in one call, more than %d", batch, len(ids), weft.MaxBatchIDs)
	}
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for i, id := range ids {
		if err := weft.CheckID(fmt.Sprintf("batch %q: ids[%d]", batch, i), id); err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// BatchChanges checks the changes that ApplyBatchItems applies to batch:
// at most weft.MaxBatchChanges; each names an instance (weft.CheckID) and
// an outcome other than pending; each message is valid (as Deliver's) and
// for the change's instance. It returns a copy in which a message without
// an InstanceID has the change's: the caller's slices are not changed.
func BatchChanges(batch string, changes []weft.BatchChange) ([]weft.BatchChange, error) {
	if len(changes) > weft.MaxBatchChanges {
		return nil, Invalid("batch %q: %d changes in one call, more than %d", batch, len(changes), weft.MaxBatchChanges)
	}
	out := make([]weft.BatchChange, len(changes))
	for i, c := range changes {
		what := fmt.Sprintf("batch %q: changes[%d]", batch, i)
		if err := weft.CheckID(what+": instance id", c.InstanceID); err != nil {
			return nil, err
		}
		if c.Outcome == weft.BatchPending || !ValidBatchOutcome(c.Outcome) {
			return nil, Invalid("%s: outcome %q is not one an item can get (done, skipped, failed, can, cannot)", what, c.Outcome)
		}
		msgs := slices.Clone(c.Messages)
		for j := range msgs {
			m := &msgs[j]
			if m.InstanceID == "" {
				m.InstanceID = c.InstanceID
			}
			if m.InstanceID != c.InstanceID {
				return nil, Invalid("%s: messages[%d] is for instance %q, not the item's %q", what, j, m.InstanceID, c.InstanceID)
			}
			if err := validateMessage(*m, fmt.Sprintf("%s: messages[%d]", what, j)); err != nil {
				return nil, err
			}
		}
		c.Messages = msgs
		out[i] = c
	}
	return out, nil
}

// ValidBatchOutcome reports whether o is one of weft.BatchOutcomes.
func ValidBatchOutcome(o weft.BatchOutcome) bool { return slices.Contains(weft.BatchOutcomes(), o) }

// BatchItemLimit checks a BatchItems filter of batch and returns its page
// size: weft.ClampLimit of f.Limit (100 for 0, at most 1,000). An Outcome
// that is neither empty nor one of weft.BatchOutcomes is refused.
func BatchItemLimit(batch string, f weft.BatchItemFilter) (int, error) {
	if f.Outcome != "" && !ValidBatchOutcome(f.Outcome) {
		return 0, Invalid("batch %q: unknown item outcome %q", batch, f.Outcome)
	}
	return weft.ClampLimit(f.Limit), nil
}
