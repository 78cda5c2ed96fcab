package apiv1

// Page is one page of a list answer. NextCursor, passed as ?cursor=,
// selects the next page; it is empty after the last page. Items is never
// null.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}
