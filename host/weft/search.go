package weft

import (
	"encoding/json"
	"fmt"
	"time"
)

// SearchType is the type of a search attribute: what a definition's
// `search` declares for each attribute, how the stores index its values,
// and which comparisons a query may make on it (docs/operations.md,
// "Search").
type SearchType string

// The search attribute types.
const (
	// SearchString is a string compared whole: equal, ordered byte by
	// byte, or starting with a prefix.
	SearchString SearchType = "string"
	// SearchNumber is a float64 (JSON numbers), ordered.
	SearchNumber SearchType = "number"
	// SearchBool is true or false.
	SearchBool SearchType = "bool"
	// SearchTime is an instant (RFC 3339 in documents and queries),
	// ordered.
	SearchTime SearchType = "time"
	// SearchKeywords is a list of strings: a query asks whether the list
	// holds a value.
	SearchKeywords SearchType = "keywords"
)

// SearchTypes returns every search attribute type, in the order the docs
// list them.
func SearchTypes() []SearchType {
	return []SearchType{SearchString, SearchNumber, SearchBool, SearchTime, SearchKeywords}
}

// Valid reports whether t is one of the search attribute types.
func (t SearchType) Valid() bool {
	switch t {
	case SearchString, SearchNumber, SearchBool, SearchTime, SearchKeywords:
		return true
	}
	return false
}

// Limits of search attributes, enforced where a definition declares them
// and where the engine evaluates them.
const (
	// MaxSearchAttributes bounds the attributes a definition declares.
	MaxSearchAttributes = 32
	// MaxSearchNameLen bounds an attribute's name, in bytes.
	MaxSearchNameLen = 64
	// MaxSearchStringLen bounds a string value and each keyword, in
	// bytes.
	MaxSearchStringLen = 256
	// MaxSearchKeywords bounds the items of a keywords value.
	MaxSearchKeywords = 32
)

// SearchValue is one search attribute's value: the field of its Type is
// set (Keywords for SearchKeywords), the others are zero.
type SearchValue struct {
	Type     SearchType
	String   string
	Number   float64
	Bool     bool
	Time     time.Time
	Keywords []string
}

// Native returns v as a Go value of its type: a string, a float64, a
// bool, a time.Time or a []string.
func (v SearchValue) Native() any {
	switch v.Type {
	case SearchString:
		return v.String
	case SearchNumber:
		return v.Number
	case SearchBool:
		return v.Bool
	case SearchTime:
		return v.Time
	case SearchKeywords:
		return v.Keywords
	}
	return nil
}

// searchValueJSON is a SearchValue as stored: its type beside its value,
// so that a time reads back as a time and not as a string.
type searchValueJSON struct {
	Type  SearchType      `json:"type"`
	Value json.RawMessage `json:"value"`
}

// MarshalJSON writes {"type": …, "value": …}.
func (v SearchValue) MarshalJSON() ([]byte, error) {
	raw, err := json.Marshal(v.Native())
	if err != nil {
		return nil, fmt.Errorf("search value of type %s: %w", v.Type, err)
	}
	return json.Marshal(searchValueJSON{Type: v.Type, Value: raw})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (v *SearchValue) UnmarshalJSON(data []byte) error {
	var j searchValueJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	out := SearchValue{Type: j.Type}
	var dst any
	switch j.Type {
	case SearchString:
		dst = &out.String
	case SearchNumber:
		dst = &out.Number
	case SearchBool:
		dst = &out.Bool
	case SearchTime:
		dst = &out.Time
	case SearchKeywords:
		dst = &out.Keywords
	default:
		return fmt.Errorf("%w: search value of unknown type %q", ErrInvalid, j.Type)
	}
	if err := json.Unmarshal(j.Value, dst); err != nil {
		return fmt.Errorf("search value of type %s: %w", j.Type, err)
	}
	*v = out
	return nil
}

// SearchAttributes are an instance's search attributes by name: the
// values of its definition's `search` for its input and variables, as of
// its last commit. An attribute whose expression yields nothing (null, a
// missing field) or a value not of its type is absent.
type SearchAttributes map[string]SearchValue

// SearchRange is the part of a query that an index of search attributes
// answers: the instances whose attribute Name (of type Type) has one of
// the values In, or lies between Lo and Hi (each bound when not nil,
// included when its Inc is set), or starts with Prefix. Exactly one of In,
// the bounds, and Prefix is used. For a keywords attribute the values of
// In and the bounds are strings (SearchString), and an instance is in the
// range when one of its keywords is (it is read once, however many of its
// keywords are).
type SearchRange struct {
	Name string
	Type SearchType
	// In lists values in the order of the index, without duplicates.
	In     []SearchValue
	Lo, Hi *SearchValue
	LoInc  bool
	HiInc  bool
	Prefix string
}

// SearchAttribute is a registered search attribute: its name, its type,
// which is its type for good, and the workflow whose definition declared
// it first.
type SearchAttribute struct {
	Name     string     `json:"name"`
	Type     SearchType `json:"type"`
	Workflow string     `json:"workflow"`
}
