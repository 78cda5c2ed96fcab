package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// instFramed starts an instance record written since payloads are kept
// apart from the record's JSON (issue 40): the byte, the record without its
// input, output and vars as JSON, then the three documents as they are,
// each after its length (uvarint). A commit reads the record it replaces
// without scanning the documents, and writes them without encoding them
// again. A record that starts with '{' is the JSON of an earlier version,
// read as before and written framed by its next commit.
const instFramed = 0x01

// encodeInst returns r as stored in bInst (framed).
func encodeInst(r *instRecord) ([]byte, error) {
	m, err := encodeMeta(r)
	if err != nil {
		return nil, err
	}
	docs := [3][]byte{r.Input, r.Output, r.Vars}
	n := 1 + 4*binary.MaxVarintLen64 + len(m)
	for _, d := range docs {
		n += len(d)
	}
	out := make([]byte, 0, n)
	out = append(out, instFramed)
	out = binary.AppendUvarint(out, uint64(len(m)))
	out = append(out, m...)
	for _, d := range docs {
		out = binary.AppendUvarint(out, uint64(len(d)))
		out = append(out, d...)
	}
	return out, nil
}

// errFrame is a framed record cut short or overlong.
var errFrame = errors.New("framed record is malformed")

// splitInst returns the JSON of a record without its documents, and the
// documents (input, output, vars; nil when absent or in the JSON, for a
// record of an earlier version). The slices share raw's memory.
func splitInst(raw []byte) (meta []byte, docs [3][]byte, err error) {
	if len(raw) == 0 || raw[0] != instFramed {
		return raw, docs, nil
	}
	rest := raw[1:]
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, errFrame
		}
		b := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return b, nil
	}
	if meta, err = next(); err != nil {
		return nil, docs, err
	}
	for i := range docs {
		d, err := next()
		if err != nil {
			return nil, docs, err
		}
		if len(d) > 0 {
			docs[i] = d
		}
	}
	if len(rest) != 0 {
		return nil, docs, errFrame
	}
	return meta, docs, nil
}

// decodeInst decodes a record of instance id. With clone the documents
// are copied out of raw (which a read transaction's end invalidates);
// without, they share raw's memory, for a record used within the
// transaction only.
func decodeInst(id string, raw []byte, clone bool) (*instRecord, error) {
	meta, docs, err := splitInst(raw)
	if err != nil {
		return nil, fmt.Errorf("instance %q: corrupt record: %w", id, err)
	}
	var r instRecord
	if err := decodeMeta(meta, &r); err != nil {
		return nil, fmt.Errorf("instance %q: corrupt record: %w", id, err)
	}
	if raw[0] == '{' {
		return &r, nil // an earlier version's: the documents were in the JSON
	}
	for i, dst := range []*json.RawMessage{&r.Input, &r.Output, &r.Vars} {
		d := docs[i]
		if clone && d != nil {
			d = append([]byte(nil), d...)
		}
		*dst = d
	}
	return &r, nil
}
