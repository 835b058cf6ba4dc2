package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The bench's own domain-unavailable time: per domain, from its first member cordoned
// to its last uncordoned, however its members overlap; a repeated state is no cordon.
func TestCordonClockCountsEachDomainOnceWhileAMemberIsOut(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	k := newCordonClock(map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b"})
	// Node by node in domain a: a1 out 0-3 s, a2 out 3-7 s (cordoned before a1 returns).
	k.observe("a1", true, at(0))
	k.observe("a1", true, at(1)) // the same state again: no new cordon
	k.observe("a2", true, at(3))
	k.observe("a1", false, at(3))
	k.observe("a2", false, at(7))
	// Domain b out whole, 10-12 s; a node of no domain is not counted.
	k.observe("b1", true, at(10))
	k.observe("b2", true, at(10))
	k.observe("x", true, at(10))
	assert.Equal(t, 7*time.Second, k.total(), "b has not come back yet")
	assert.Equal(t, 2, k.cordoned())
	k.observe("b1", false, at(12))
	k.observe("b2", false, at(12))
	assert.Equal(t, 9*time.Second, k.total())
	assert.Equal(t, 2, k.most)
	assert.Equal(t, 1, k.mostCordons())
	k.observe("a1", true, at(20))
	assert.Equal(t, 2, k.mostCordons())
}

func TestVerdictNamesTheBetterStrategy(t *testing.T) {
	n := domainRun{wall: 60 * time.Second, status: 60 * time.Second}
	assert.Equal(t, "better: by domain (lower wall time and domain-unavailable time)", verdict(n, domainRun{wall: 20 * time.Second, status: 20 * time.Second}))
	assert.Equal(t, "better: node by node (by domain is lower on neither)", verdict(n, domainRun{wall: 60 * time.Second, status: 70 * time.Second}))
	assert.Equal(t, "by domain: lower domain-unavailable time, node by node: lower wall time", verdict(n, domainRun{wall: 70 * time.Second, status: 20 * time.Second}))
}
