package podindex

import "github.com/runwhere-ai/litepool/pkg/policy"

// NewUnstarted is an index whose informer never runs: a test fills it with Add.
func NewUnstarted(accel *policy.Accelerators) (*Index, error) { return newIndex(nil, accel) }

// Add puts an entry in the index as the informer would.
func (x *Index) Add(e *Entry) error { return x.informer.GetIndexer().Add(e) }
