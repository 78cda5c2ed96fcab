package store

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
)

// EncodeHistory returns a history entry's JSON, the bytes encoding/json
// writes for it (HTML escaped, the empty fields left out) but with its data
// spliced in as it is: encoding/json would compact it again (it re-scans
// every json.RawMessage it writes), and an entry's data may be a copy of
// hundreds of KiB of variables. The data was checked by Commit.Validate.
// A commit writes an entry per step and attempt, so the entry is written
// field by field rather than through reflection.
func EncodeHistory(e weft.HistoryEntry) ([]byte, error) {
	return AppendHistory(make([]byte, 0, 160+len(e.Data)), e)
}

// AppendHistory appends EncodeHistory's bytes for e to b.
func AppendHistory(b []byte, e weft.HistoryEntry) ([]byte, error) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"time":"`...)
	b, err := e.Time.AppendText(b)
	if err != nil {
		return nil, fmt.Errorf("history entry %d: time: %w", e.Seq, err)
	}
	b = append(b, `","type":`...)
	b = jsonv.AppendString(b, string(e.Type))
	if e.StepPath != "" {
		b = append(b, `,"step_path":`...)
		b = jsonv.AppendString(b, e.StepPath)
	}
	if e.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(e.Attempt), 10)
	}
	if e.Node != "" {
		b = append(b, `,"node":`...)
		b = jsonv.AppendString(b, e.Node)
	}
	if e.Actor != "" {
		b = append(b, `,"actor":`...)
		b = jsonv.AppendString(b, e.Actor)
	}
	if len(e.Data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, e.Data...)
	}
	return append(b, '}'), nil
}

// EncodeInstance returns in's JSON with its documents (input, output,
// vars) spliced in as they are, for the same reason. The documents were
// checked by Commit.Validate.
func EncodeInstance(in weft.Instance) ([]byte, error) {
	docs := []jsonv.Field{{Name: "input", Value: in.Input}, {Name: "output", Value: in.Output}, {Name: "vars", Value: in.Vars}}
	in.Input, in.Output, in.Vars = nil, nil, nil
	head, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	for i := range docs {
		if len(docs[i].Value) == 0 {
			docs[i].Value = nil // omitempty, as encoding/json leaves them out
		}
	}
	return jsonv.AppendFields(head, docs...)
}
