// Package rounds judges a figure measured in several rounds against its goal, as the
// benches' summaries do: on the median of the rounds, and undecided when the rounds fall
// on both sides of the goal (on 2 shared cores one round's ratio spreads by a third or
// more, so a median alone can land either side by chance).
package rounds

import "slices"

// Median is the middle value of xs (the mean of the middle two for an even count); 0
// for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	mid := len(s) / 2
	if len(s)%2 == 0 {
		return (s[mid-1] + s[mid]) / 2
	}
	return s[mid]
}

// Judgement is what the rounds say of a goal.
type Judgement struct {
	// Rounds is how many there were; with none, the rest means nothing.
	Rounds int
	// MedianMeets: the rounds' median meets the goal.
	MedianMeets bool
	// Split: some rounds meet the goal and some miss it, so the median alone is too
	// wide to decide.
	Split bool
}

// Judge judges xs with meets, which says whether one value meets the goal.
func Judge(xs []float64, meets func(float64) bool) Judgement {
	j := Judgement{Rounds: len(xs)}
	if len(xs) == 0 {
		return j
	}
	j.MedianMeets = meets(Median(xs))
	n := 0
	for _, x := range xs {
		if meets(x) {
			n++
		}
	}
	j.Split = n > 0 && n < len(xs)
	return j
}
