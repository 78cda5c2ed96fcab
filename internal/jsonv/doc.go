// Package jsonv keeps JSON documents as their bytes: a payload that a
// workflow passes whole, from an instance's input or an activity's output
// to the next activity, the state and the stores, is validated once where
// it enters and then copied, never decoded and encoded again. It is
// decoded, once, only when an expression computes on it.
//
// Invariant: a *Doc is a whole value. It may be an instance's input, a
// variable, an output, an activity's input, a loop's local; it is never
// nested inside a Go map or slice (a container holding one is encoded into
// a Doc of its own, see Containing), so that code reading decoded values
// finds only the types encoding/json decodes to.
package jsonv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// ErrInvalid is matched by the error New returns for bytes that are not one
// JSON document in UTF-8.
var ErrInvalid = errors.New("not a JSON document")

// Doc is one JSON document kept as its bytes, decoded on first use. A Doc
// is immutable and safe for concurrent use; the value Value returns is
// shared by every caller and must not be modified.
type Doc struct {
	raw  []byte
	once sync.Once
	v    any
	err  error
}

// New returns raw as a Doc, after checking that it is one JSON document
// (duplicate names allowed, as encoding/json allows them). Surrounding
// whitespace is trimmed, and bytes that are not UTF-8 are replaced with
// U+FFFD (JSON is UTF-8; encoding/json, which decoded every payload before
// documents were kept whole, replaced them too); the rest is kept byte for
// byte. raw must not be modified afterwards.
func New(raw []byte) (*Doc, error) {
	raw = UTF8(bytes.Trim(raw, " \t\r\n")) // JSON's whitespace only
	if !jsontext.Value(raw).IsValid(jsontext.AllowDuplicateNames(true)) {
		return nil, ErrInvalid
	}
	return &Doc{raw: raw}, nil
}

// Compact returns raw without whitespace between its tokens (strings and
// numbers as they are), in a new slice; an error matching ErrInvalid when
// raw is not one JSON document.
func Compact(raw []byte) ([]byte, error) {
	v := jsontext.Value(bytes.Clone(raw))
	if err := v.Compact(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return v, nil
}

// UTF8 returns raw with the bytes that are not UTF-8 replaced by U+FFFD,
// raw itself when it is UTF-8: what a document gets where it enters.
func UTF8(raw []byte) []byte {
	if utf8.Valid(raw) {
		return raw
	}
	return bytes.ToValidUTF8(raw, []byte("\uFFFD"))
}

// Trusted returns raw as a Doc without checking it: for bytes this process
// validated or encoded before (a document read back from the store). raw
// must not be modified afterwards.
func Trusted(raw []byte) *Doc { return &Doc{raw: raw} }

// Bytes returns the document's bytes, which the caller must not modify.
func (d *Doc) Bytes() []byte { return d.raw }

// Len is the document's size in bytes.
func (d *Doc) Len() int { return len(d.raw) }

// Value returns the document decoded as encoding/json decodes into an any
// (maps, slices, float64s, strings, bools, nil), decoding it on the first
// call. The error says why a valid document does not decode: a number
// beyond float64's range.
func (d *Doc) Value() (any, error) {
	d.once.Do(func() {
		if err := json.Unmarshal(d.raw, &d.v); err != nil {
			d.err = fmt.Errorf("decoding a document of %d bytes: %w", len(d.raw), err)
		}
	})
	return d.v, d.err
}

// MarshalJSON returns the document's bytes. (encoding/json re-scans what a
// Marshaler returns; the encoders that matter splice with AppendFields
// instead.)
func (d *Doc) MarshalJSON() ([]byte, error) { return d.raw, nil }

// Plain returns x decoded when it is a *Doc, and x itself otherwise: the
// value an expression computes on.
func Plain(x any) (any, error) {
	if d, ok := x.(*Doc); ok {
		return d.Value()
	}
	return x, nil
}

// Encode returns x as JSON: a Doc's bytes as they are, and those of a
// json.RawMessage too (trusted: the host's own encodings, and documents
// checked where they entered), anything else encoded by encoding/json
// without HTML escaping.
func Encode(x any) ([]byte, error) {
	switch x := x.(type) {
	case *Doc:
		return x.raw, nil
	case json.RawMessage:
		if x == nil {
			return []byte("null"), nil
		}
		return x, nil
	// The values of history entries' data (a step's name, an attempt's
	// number), without an encoder each.
	case string:
		if plainString(x) {
			return AppendString(make([]byte, 0, len(x)+2), x), nil
		}
	case int:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case bool:
		return strconv.AppendBool(nil, x), nil
	case nil:
		return []byte("null"), nil
	}
	return encode(x)
}

// Marshal is json.Marshal without HTML escaping, so that the documents
// and json.RawMessages in v keep their bytes (encoding/json still
// re-scans them: the encodings that carry large documents splice them
// instead, see AppendFields).
func Marshal(v any) ([]byte, error) { return encode(v) }

func encode(x any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
