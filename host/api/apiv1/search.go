package apiv1

// SearchType is the type of a search attribute (docs/operations.md,
// "Search"): what a definition's `search` declares for an attribute, and
// what a query may compare it with.
type SearchType string

// The search attribute types (openapi.json's SearchAttribute.type).
const (
	// SearchString is a string, compared whole, byte by byte, or by a
	// prefix.
	SearchString SearchType = "string"
	// SearchNumber is a number (a 64-bit float).
	SearchNumber SearchType = "number"
	// SearchBool is true or false.
	SearchBool SearchType = "bool"
	// SearchTime is an instant, an RFC 3339 string in UTC in an
	// instance's search.
	SearchTime SearchType = "time"
	// SearchKeywords is a list of strings; a query asks whether it holds
	// a value.
	SearchKeywords SearchType = "keywords"
)

// SearchAttribute is a registered search attribute: a name that a saved
// definition declared, with its type, which is its type for good on the
// whole host, and the workflow that declared it first.
type SearchAttribute struct {
	Name     string     `json:"name"`
	Type     SearchType `json:"type"`
	Workflow string     `json:"workflow"`
}

// SearchAttributes is GET /v1/search-attributes's answer: every
// registered search attribute, by name. Items is never null. The
// registry only grows (a name keeps its type even when no definition
// declares it any more), so the list is not paged.
type SearchAttributes struct {
	Items []SearchAttribute `json:"items"`
}
