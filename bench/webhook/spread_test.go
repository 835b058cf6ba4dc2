package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRatioSpread(t *testing.T) {
	trivial := []result{{rate: 100}, {rate: 110}, {rate: 90}, {rate: 100}}
	litepool := []result{{rate: 100}, {rate: 100}, {rate: 100}, {rate: 80}}
	s := ratioSpread(trivial, litepool)
	assert.Equal(t, []float64{1, 1.1, 0.9, 1.25}, s.ratios)
	assert.InDelta(t, 0.9, s.min, 1e-9)
	assert.InDelta(t, 1.05, s.median, 1e-9, "even count: the mean of the middle two")
	assert.InDelta(t, 1.25, s.max, 1e-9)
	assert.Contains(t, s.verdict(1.05), "median meets <= 1.05x, but rounds fall on both sides: too wide to decide")
	assert.Contains(t, s.verdict(1.3), "meets <= 1.30x in every round")
	assert.Contains(t, s.verdict(0.8), "misses <= 0.80x in every round")
	assert.Contains(t, ratioSpread(trivial[:3], litepool[:3]).verdict(1.05), "median meets", "odd count: the middle one, 1.0")
	assert.Equal(t, "no round", ratioSpread(nil, nil).verdict(1.05))
}

// The own-CPU ratio pairs litepool's round with the trivial webhook's round of the same
// index, each read from its own process, and skips a round whose baseline read nothing.
func TestOwnCPURatioSpread(t *testing.T) {
	litepool := []result{{cpuWebhook: 600 * time.Microsecond}, {cpuWebhook: 450 * time.Microsecond}, {cpuWebhook: 500 * time.Microsecond}}
	trivial := []result{{cpuBaseline: 200 * time.Microsecond}, {cpuBaseline: 300 * time.Microsecond}, {cpuBaseline: 0}}
	s := ownCPURatioSpread(litepool, trivial)
	assert.Equal(t, []float64{3, 1.5}, s.ratios)
	assert.InDelta(t, 2.25, s.median, 1e-9)
	assert.Contains(t, s.verdict(ownCPUGoal), "rounds fall on both sides")
}
