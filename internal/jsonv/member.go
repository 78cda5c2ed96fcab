package jsonv

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// Member returns the member name of the object d is, as a document of its
// own: a slice of d's bytes, found by scanning them, not by decoding d
// (about ten times cheaper: `${ vars.order.lines }` passes the lines of a
// large order without decoding the order). Of duplicate names the last
// wins, as when d is decoded. found is false when d is an object without
// the member; object is false when d is not an object (null, a list, a
// string…), for the caller to say what reading a member of it does.
func (d *Doc) Member(name string) (m *Doc, found, object bool, err error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(d.raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if dec.PeekKind() != '{' {
		return nil, false, false, nil
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, false, true, fmt.Errorf("reading member %q of a document of %d bytes: %w", name, len(d.raw), err)
	}
	var last []byte
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, false, true, fmt.Errorf("reading member %q of a document of %d bytes: %w", name, len(d.raw), err)
		}
		if tok.String() != name {
			if err := dec.SkipValue(); err != nil {
				return nil, false, true, fmt.Errorf("reading member %q of a document of %d bytes: %w", name, len(d.raw), err)
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false, true, fmt.Errorf("reading member %q of a document of %d bytes: %w", name, len(d.raw), err)
		}
		// Sliced from d by its offset, not kept as the decoder's v, which
		// is valid only until its next read; a document's bytes never
		// change.
		end := int(dec.InputOffset())
		last, found = d.raw[end-len(v):end:end], true
	}
	if !found {
		return nil, false, true, nil
	}
	return &Doc{raw: last}, true, true, nil
}
