// Package gcpace sets the garbage collector's pace (GOGC) from the live heap after every
// collection, so that litepool-webhook spends Go's default CPU on collection while the
// heap is small and holds its memory as the cluster grows. A fixed GOGC cannot do both:
// at 25 the webhook spent 0.68 ms of CPU per pod create against 0.49 ms at 100
// (bench/webhook, 1,000 nodes), and at 100 its peak at 5,000 nodes would pass the memory
// goal (docs/webhook.md, Memory). Go's memory limit (GOMEMLIMIT) only lowers the pace
// near a fixed ceiling and collects without pause once the live heap reaches it; here the
// pace never goes below Floor, so a cluster larger than the budget costs what GOGC=25
// did, no more.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Floor and Ceiling bound the percent: Ceiling is Go's default, Floor the setting the
// processes had before (a heap at most 1.25 times the live one).
const (
	Floor   = 25
	Ceiling = 100
)

// Percent is the GOGC that lets the heap grow to budget bytes after a collection that
// left live bytes, within [Floor, Ceiling].
func Percent(live, budget uint64) int {
	if live == 0 || budget >= live*(100+Ceiling)/100 {
		return Ceiling
	}
	p := int(100*budget/live) - 100
	return max(Floor, min(Ceiling, p))
}

// Start paces the collector for the rest of the process: after each collection it sets
// GOGC to Percent(live heap, budget). It starts at Floor, so that the burst of the
// informers' first lists is collected as before until a collection has measured the
// live heap.
func Start(budget uint64) {
	debug.SetGCPercent(Floor)
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	last := Floor
	var rearm func(*sentinel)
	rearm = func(x *sentinel) {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 {
			if p := Percent(s[0].Value.Uint64(), budget); p != last {
				debug.SetGCPercent(p)
				last = p
			}
		}
		runtime.SetFinalizer(x, rearm) // runs again after the next collection
	}
	runtime.SetFinalizer(&sentinel{}, rearm)
}

// sentinel is an object nothing references: its finalizer runs once per collection.
type sentinel struct{ _ [16]byte }
