package queue

import (
	"math/big"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Share is one namespace's share of a pool's queue as it is written: its quotas after
// Split, and its own ClusterQueue's name.
type Share struct {
	Namespace    string
	ClusterQueue string
	Accelerators int64
	Devices      int64
	CPU, Memory  resource.Quantity
	// BorrowingLimit is the share's cap on what it borrows from the cohort (nil: none).
	BorrowingLimit *int64
}

// ShareQueueName is the ClusterQueue of namespace's share of pool.
func ShareQueueName(pool, namespace string) string { return pool + "-" + namespace }

// Cohort is the Kueue cohort of the pool's queues: the Pool's own, else, when it has
// shares (they must borrow from each other), the pool's name.
func Cohort(pool *v1alpha1.Pool) string {
	if q := pool.Spec.Queue; q.Cohort != "" || len(q.Shares) == 0 {
		return q.Cohort
	}
	return pool.Name
}

// Split divides the capacity among the pool's shares (spec.queue.shares) and the pool's
// own queue, which keeps what the shares do not take. The sum of what it writes is never
// more than the capacity: when a resource's capacity drops below the sum of the shares,
// the pool keeps none of it and each share gets it in proportion to what it asked
// (rounded down, the units left over going to the largest remainders, then to the
// shares listed first).
func Split(pool *v1alpha1.Pool, c policy.Capacity) (shares []Share, rest policy.Capacity) {
	asked := pool.Spec.Queue.Shares
	rest = c
	acc, dev := make([]int64, len(asked)), make([]int64, len(asked))
	cpu, mem := make([]int64, len(asked)), make([]int64, len(asked))
	for i, s := range asked {
		acc[i], dev[i] = s.Accelerators, s.Devices
		if s.CPU != nil {
			cpu[i] = s.CPU.MilliValue()
		}
		if s.Memory != nil {
			mem[i] = s.Memory.Value()
		}
	}
	var left int64
	acc, rest.Accelerators = apportion(c.Accelerators, acc)
	dev, rest.Devices = apportion(c.Devices, dev)
	cpu, left = apportion(c.CPU.MilliValue(), cpu)
	rest.CPU = *resource.NewMilliQuantity(left, resource.DecimalSI)
	mem, left = apportion(c.Memory.Value(), mem)
	rest.Memory = *resource.NewQuantity(left, resource.BinarySI)
	for i, s := range asked {
		shares = append(shares, Share{Namespace: s.Namespace, ClusterQueue: ShareQueueName(pool.Name, s.Namespace),
			Accelerators: acc[i], Devices: dev[i],
			CPU:            *resource.NewMilliQuantity(cpu[i], resource.DecimalSI),
			Memory:         *resource.NewQuantity(mem[i], resource.BinarySI),
			BorrowingLimit: s.BorrowingLimit})
	}
	return shares, rest
}

// apportion gives each ask its amount when total covers them all, returning the rest;
// else total in proportion to the asks (largest remainder), and 0 left.
func apportion(total int64, asks []int64) (got []int64, left int64) {
	var sum int64
	for _, a := range asks {
		sum += a
	}
	total = max(total, 0)
	if sum <= total {
		return asks, total - sum
	}
	got = make([]int64, len(asks))
	type rem struct {
		i int
		r int64
	}
	rems := make([]rem, len(asks))
	var given int64
	for i, a := range asks {
		q, r := mulDiv(a, total, sum)
		got[i], given = q, given+q
		rems[i] = rem{i, r}
	}
	slices.SortStableFunc(rems, func(x, y rem) int {
		switch {
		case x.r > y.r:
			return -1
		case x.r < y.r:
			return 1
		}
		return 0
	})
	for k := 0; given < total && k < len(rems); k++ {
		got[rems[k].i]++
		given++
	}
	return got, 0
}

// mulDiv is a*b/c and its remainder (memory in bytes times bytes overflows int64).
func mulDiv(a, b, c int64) (q, r int64) {
	var qb, rb big.Int
	qb.QuoRem(new(big.Int).Mul(big.NewInt(a), big.NewInt(b)), big.NewInt(c), &rb)
	return qb.Int64(), rb.Int64()
}
