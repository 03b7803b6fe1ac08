package counters

import "strings"

// Suggest returns the known field name closest to name, compared without
// case, or "" when none is close enough to be the intended one.
func Suggest(name string) string {
	target := strings.ToLower(name)
	limit := max(2, len(target)/5)
	best, bestDist := "", limit+1
	for _, f := range All() {
		d := levenshtein(target, strings.ToLower(f.Name), bestDist)
		if d < bestDist {
			best, bestDist = f.Name, d
		}
	}
	return best
}

// levenshtein is the edit distance of a and b; it returns bound as soon as
// the distance is known to be at least bound.
func levenshtein(a, b string, bound int) int {
	if d := len(a) - len(b); d >= bound || -d >= bound {
		return bound
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= bound {
			return bound
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
