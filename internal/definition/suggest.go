package definition

// closest returns the candidate nearest to name in edit distance, when it
// is near enough to be a typo of it (at most a third of name's length, and
// at least one edit), or "".
func closest(name string, candidates []string) string {
	best, bestDist := "", max(1, len(name)/3)+1
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the number of insertions, deletions, substitutions and
// transpositions of adjacent bytes that turn a into b (optimal string
// alignment): "inptu" is one edit from "input".
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// didYouMean is "; did you mean X?" when a candidate is close to name, or
// "".
func didYouMean(name string, candidates []string) string {
	if c := closest(name, candidates); c != "" {
		return "; did you mean " + c + "?"
	}
	return ""
}
