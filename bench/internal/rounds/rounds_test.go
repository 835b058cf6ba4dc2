package rounds

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMedian(t *testing.T) {
	assert.Equal(t, 0.0, Median(nil))
	assert.Equal(t, 2.0, Median([]float64{3, 1, 2}), "odd count: the middle one")
	assert.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}), "even count: the mean of the middle two")
}

func TestJudge(t *testing.T) {
	atLeast := func(goal float64) func(float64) bool { return func(x float64) bool { return x >= goal } }
	assert.Equal(t, Judgement{Rounds: 3, MedianMeets: true}, Judge([]float64{0.96, 1.2, 1.0}, atLeast(0.95)), "every round meets it")
	assert.Equal(t, Judgement{Rounds: 3}, Judge([]float64{0.6, 0.9, 0.78}, atLeast(0.95)), "every round misses it")
	assert.Equal(t, Judgement{Rounds: 3, MedianMeets: true, Split: true}, Judge([]float64{0.55, 1.02, 1.5}, atLeast(0.95)), "the median meets it, a round does not")
	assert.Equal(t, Judgement{Rounds: 3, Split: true}, Judge([]float64{0.55, 0.78, 1.5}, atLeast(0.95)), "the median misses it, a round meets it")
	assert.Equal(t, Judgement{}, Judge(nil, atLeast(0.95)), "no round")
}
