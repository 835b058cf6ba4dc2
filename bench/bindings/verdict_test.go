package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRoundsVerdict(t *testing.T) {
	assert.Equal(t, " ok", roundsVerdict([]float64{0.96, 1.2, 1.0}, 0.95), "every round meets the goal")
	assert.Equal(t, " MISS", roundsVerdict([]float64{0.6, 0.9, 0.78}, 0.95), "every round misses it")
	assert.Equal(t, " ok?", roundsVerdict([]float64{0.55, 1.02, 1.5}, 0.95), "the median meets it, a round does not")
	assert.Equal(t, " MISS?", roundsVerdict([]float64{0.55, 0.78, 1.5}, 0.95), "the median misses it, a round meets it")
	assert.Empty(t, roundsVerdict(nil, 0.95), "no round, no verdict")
}
