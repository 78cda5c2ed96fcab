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

// FuzzEncodeHistory: an entry's encoding is encoding/json's, its data
// spliced as it is.
func FuzzEncodeHistory(f *testing.F) {
	f.Add(uint64(1), int64(1796031527300703000), "activity_completed", "steps[0]", 1, "n1", "", `{"step":"a"}`)
	f.Add(uint64(0), int64(0), "", "", 0, "", "", "")
	f.Add(uint64(1<<63), int64(-1<<62), "a<b>&\u2028é\"\\\t", "p\x00\xff", -3, "nœud", "ops <team>", `[1, 2]`)
	f.Fuzz(func(t *testing.T, seq uint64, nanos int64, typ, path string, attempt int, node, actor, data string) {
		e := weft.HistoryEntry{Seq: seq, Time: time.Unix(0, nanos).UTC(), Type: weft.HistoryType(typ), StepPath: path, Attempt: attempt, Node: node, Actor: actor}
		if json.Valid([]byte(data)) {
			e.Data = json.RawMessage(data)
		}
		got, err := store.EncodeHistory(e)
		head := e
		head.Data = nil
		want, werr := json.Marshal(head)
		if (err != nil) != (werr != nil) {
			t.Fatalf("EncodeHistory: %v, encoding/json: %v", err, werr)
		}
		if err != nil {
			return
		}
		if len(e.Data) > 0 {
			want = append(append(append(want[:len(want)-1:len(want)-1], `,"data":`...), e.Data...), '}')
		}
		if !bytes.Equal(got, want) {
			t.Errorf("EncodeHistory = %s\nencoding/json: %s", got, want)
		}
	})
}
