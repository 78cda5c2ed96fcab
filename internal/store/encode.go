package store

import (
	"encoding/json"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
)

// EncodeHistory returns a history entry's JSON with its data spliced in as
// it is: encoding/json would compact it again (it re-scans every
// json.RawMessage it writes), and an entry's data may be a copy of
// hundreds of KiB of variables. The data was checked by Commit.Validate.
func EncodeHistory(e weft.HistoryEntry) ([]byte, error) {
	data := e.Data
	e.Data = nil
	head, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return head, nil
	}
	return jsonv.AppendFields(head, jsonv.Field{Name: "data", Value: data})
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
