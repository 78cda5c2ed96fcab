package jsonv

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
)

// Field is a member to splice into an encoded object: its name and its
// value, JSON already.
type Field struct {
	Name string
	// Value is valid JSON; a nil Value leaves the field out.
	Value []byte
}

// AppendFields returns obj, an encoded JSON object, with fields added as
// its last members, their values copied as they are. It is how a struct
// whose large members are documents already is encoded: the struct
// without them by encoding/json, then the documents spliced in, so that
// their bytes are copied once and not re-scanned (encoding/json compacts
// every json.RawMessage and Marshaler result it writes). obj must not
// hold members of the same names.
func AppendFields(obj []byte, fields ...Field) ([]byte, error) {
	obj = bytes.TrimRight(obj, " \t\r\n")
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, errors.New("jsonv: splicing into something that is not an encoded object")
	}
	n := len(obj)
	for _, f := range fields {
		if f.Value != nil {
			n += len(f.Name) + len(f.Value) + 8
		}
	}
	out := make([]byte, 0, n)
	out = append(out, obj[:len(obj)-1]...)
	empty := len(bytes.TrimSpace(obj[1:len(obj)-1])) == 0
	for _, f := range fields {
		if f.Value == nil {
			continue
		}
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = AppendString(out, f.Name)
		out = append(out, ':')
		out = append(out, f.Value...)
	}
	return append(out, '}'), nil
}

// EncodeMap encodes m as a JSON object with its keys sorted, as
// encoding/json encodes a map, and each value as Encode does: a Doc's or
// a json.RawMessage's bytes copied.
func EncodeMap(m map[string]any) ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	keys := make([]string, 0, len(m))
	size := 2
	for k, v := range m {
		keys = append(keys, k)
		switch v := v.(type) {
		case *Doc:
			size += len(v.raw)
		case json.RawMessage:
			size += len(v)
		}
		size += len(k) + 4
	}
	slices.Sort(keys)
	out := make([]byte, 0, size)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = AppendString(out, k)
		out = append(out, ':')
		b, err := Encode(m[k])
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return append(out, '}'), nil
}

// Len is the size of x encoded: a Doc's without encoding it.
func Len(x any) (int, error) {
	if d, ok := x.(*Doc); ok {
		return len(d.raw), nil
	}
	b, err := encode(x)
	return len(b), err
}

// AppendString appends s as a JSON string, as encoding/json's Marshal
// writes it (HTML characters escaped).
func AppendString(out []byte, s string) []byte {
	if plainString(s) {
		out = append(out, '"')
		out = append(out, s...)
		return append(out, '"')
	}
	b, _ := json.Marshal(s) // a string always encodes
	return append(out, b...)
}

// plainString reports whether s needs no escape in JSON.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// EncodeList encodes l as a JSON array, each item as Encode does.
func EncodeList(l []any) ([]byte, error) {
	if l == nil {
		return []byte("null"), nil
	}
	out := []byte{'['}
	for i, x := range l {
		if i > 0 {
			out = append(out, ',')
		}
		b, err := Encode(x)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return append(out, ']'), nil
}
