package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, Ceiling},
		{10 * mib, Ceiling}, // twice the live heap fits the budget
		{32 * mib, Ceiling},
		{40 * mib, 60},
		{48 * mib, 33},
		{60 * mib, Floor},
		{500 * mib, Floor},
	} {
		assert.Equal(t, c.want, Percent(c.live, 64*mib), "live %d MiB", c.live/mib)
	}
}

// TestStartPacesAfterACollection: with a live heap far below the budget, the first
// collections move GOGC from the floor to the ceiling.
func TestStartPacesAfterACollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	Start(1 << 30)
	assert.Equal(t, Floor, gogc(), "it starts at the floor")
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != Ceiling {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, not %d, after collections of a small heap", gogc(), Ceiling)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // finalizers run on their own goroutine
	}
}

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
