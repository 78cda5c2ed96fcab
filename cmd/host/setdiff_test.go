package main

import "slices"

// missing returns the items of want that got lacks, in want's order: the
// docs tests compare a list a document keeps with the one the code has,
// both ways.
func missing(want, got []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			out = append(out, w)
		}
	}
	return out
}
