package store_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// TestEncodeSplices: an instance's documents and an entry's data are
// spliced as they are (no HTML escape, no compaction), and what is encoded
// reads back as encoding/json's encoding does.
func TestEncodeSplices(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	for _, in := range []weft.Instance{
		{ID: "i1", Workflow: "w", Status: weft.StatusCompleted, CreatedAt: at, Input: json.RawMessage(`{"a": "<&>"}`), Output: json.RawMessage(`1e400`), Vars: json.RawMessage(`{}`)},
		{ID: "i2", Workflow: "w", Status: weft.StatusPending, CreatedAt: at},
	} {
		raw, err := store.EncodeInstance(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(in.Input) > 0 && !bytes.Contains(raw, in.Input) {
			t.Errorf("%s: %s does not hold the input as it is", in.ID, raw)
		}
		var got weft.Instance
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("%s: %s: %v", in.ID, raw, err)
		}
		if !reflect.DeepEqual(got, in) {
			t.Errorf("%s: read %+v, want %+v", in.ID, got, in)
		}
		if bytes.Contains(raw, []byte(`"output"`)) != (len(in.Output) > 0) {
			t.Errorf("%s: %s: an empty document must be left out", in.ID, raw)
		}
	}
}
