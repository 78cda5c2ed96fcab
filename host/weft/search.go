package weft

import "time"

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
// set (Keywords for SearchKeywords), the others are zero. As JSON (how
// the stores keep it) it is its type and its one field, which an omitted
// field's zero value reads back as: plain struct tags, so that the
// stores decode it in one pass, with no method of its own (an instance is
// decoded at every commit).
type SearchValue struct {
	Type     SearchType `json:"type"`
	String   string     `json:"string,omitempty"`
	Number   float64    `json:"number,omitempty"`
	Bool     bool       `json:"bool,omitempty"`
	Time     time.Time  `json:"time,omitzero"`
	Keywords []string   `json:"keywords,omitempty"`
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
