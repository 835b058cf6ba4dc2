package policy

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// QueueHolder is what admission knows of the scheduler object the pool's queue would
// take the name of: whether one exists, and whether the pool owns it (a controller
// ownerReference to its uid; a label is not proof).
type QueueHolder struct {
	Kind          string
	Exists, Owned bool
}

// CheckQueue is rule R1 on spec.queue: one scheduler's fields only (a pool feeds one
// scheduler: spec.queue.scheduler is one field), Volcano's deserved and guarantee never
// above the pool's schedulable capacity nor guarantee above deserved (judged when they
// are set or raised: a capacity that drops later lowers them in the Queue, not in the
// spec), and a queue name no one else holds. accelerators is the capacity
// (PoolCapacity's, less headroom) and old the pool before an update (nil on create).
func CheckQueue(pool, old *v1alpha1.Pool, accelerators int64, holder QueueHolder) error {
	q := pool.Spec.Queue
	if q == nil {
		return nil
	}
	var errs []error
	if q.Scheduler == v1alpha1.QueueVolcano {
		errs = append(errs, kueueOnly(q)...)
		errs = append(errs, checkVolcanoAmounts(pool, old, accelerators)...)
		if holder.Exists && !holder.Owned {
			errs = append(errs, fieldViolationf("R1", "metadata.name",
				"metadata.name: a Volcano %s named %q exists and is not pool %q's (no controller ownerReference to it): litepool never takes over another's queue; name the pool otherwise, or delete that %s",
				holder.Kind, pool.Name, pool.Name, holder.Kind))
		}
		return errors.Join(errs...)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"deserved", q.Deserved != nil}, {"guarantee", q.Guarantee != nil}} {
		if f.set {
			errs = append(errs, fieldViolationf("R1", "spec.queue."+f.name, "spec.queue.%s is Volcano's (its Queue's %s): a pool feeding %s has no such field; set spec.queue.scheduler: Volcano, or leave it out",
				f.name, f.name, schedulerName(q.Scheduler)))
		}
	}
	return errors.Join(errs...)
}

func schedulerName(s v1alpha1.QueueScheduler) v1alpha1.QueueScheduler {
	if s == "" {
		return v1alpha1.QueueKueue
	}
	return s
}

// kueueOnly refuses Kueue's fields on a pool that feeds Volcano: they would say
// something Volcano's Queue does not do.
func kueueOnly(q *v1alpha1.QueueSpec) []error {
	var errs []error
	refuse := func(field string, set bool) {
		if set {
			errs = append(errs, fieldViolationf("R1", field, "%s is Kueue's; a pool feeds one scheduler, and this one feeds Volcano (spec.queue.scheduler): leave %s out, or set scheduler: Kueue", field, field))
		}
	}
	refuse("spec.queue.cohort", q.Cohort != "")
	refuse("spec.queue.borrowingLimit", q.BorrowingLimit != nil)
	refuse("spec.queue.lendingLimit", q.LendingLimit != nil)
	refuse("spec.queue.devices", q.Devices != nil)
	refuse("spec.queue.shares", len(q.Shares) > 0)
	return errs
}

func checkVolcanoAmounts(pool, old *v1alpha1.Pool, accelerators int64) []error {
	q := pool.Spec.Queue
	var before *v1alpha1.QueueSpec
	if old != nil {
		before = old.Spec.Queue
	}
	raised := func(now *int64, was func(*v1alpha1.QueueSpec) *int64) bool {
		if now == nil {
			return false
		}
		if before == nil || was(before) == nil {
			return true
		}
		return *now > *was(before)
	}
	var errs []error
	if raised(q.Deserved, func(s *v1alpha1.QueueSpec) *int64 { return s.Deserved }) && *q.Deserved > accelerators {
		errs = append(errs, fieldViolationf("R1", "spec.queue.deserved", "spec.queue.deserved %d is above the pool's schedulable capacity %d: Volcano's Queue may deserve at most its capability; set at most %d", *q.Deserved, accelerators, accelerators))
	}
	if raised(q.Guarantee, func(s *v1alpha1.QueueSpec) *int64 { return s.Guarantee }) {
		top, what := accelerators, fmt.Sprintf("the pool's schedulable capacity %d", accelerators)
		if q.Deserved != nil && *q.Deserved < top {
			top, what = *q.Deserved, fmt.Sprintf("spec.queue.deserved %d", *q.Deserved)
		}
		if *q.Guarantee > top {
			errs = append(errs, fieldViolationf("R1", "spec.queue.guarantee", "spec.queue.guarantee %d is above %s: Volcano guarantees at most what the Queue deserves and has; set at most %d", *q.Guarantee, what, top))
		}
	}
	return errs
}

// CheckQueueSubmission is rule P4 for the queue's own objects: a Volcano Job or PodGroup
// (kind) in namespace naming queue is refused when queue is the Volcano Queue of pool
// and the pool does not admit the namespace, as its pods would be. pool is the Pool of
// the queue's name (nil: none, so not litepool's queue, judged by no one here).
func CheckQueueSubmission(kind, namespace, queue string, pool *v1alpha1.Pool, ns *corev1.Namespace) error {
	if pool == nil || pool.Spec.Queue == nil || pool.Spec.Queue.Scheduler != v1alpha1.QueueVolcano {
		return nil
	}
	if err := CheckPodNamespace(PoolInfo{Name: pool.Name, Object: pool}, ns, namespace); err != nil {
		return fieldViolationf("P4", "spec.queue", "%s in namespace %q names Volcano queue %q, which is pool %q's, and the pool does not admit namespace %q (its spec.namespaces and spec.namespaceSelector say which do): submit to a queue whose pool admits %q, or have %q added to pool %q",
			kind, namespace, queue, pool.Name, namespace, namespace, namespace, pool.Name)
	}
	return nil
}
