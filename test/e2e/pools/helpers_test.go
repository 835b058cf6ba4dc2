package pools

import "time"

const (
	waitInterval = 200 * time.Millisecond
	waitTimeout  = 30 * time.Second
)
