// Package queue turns a pool's schedulable capacity (policy.PoolCapacity, one
// computation for every scheduler) into a scheduler's queue objects. Each scheduler is
// one Adapter: Kueue's (ResourceFlavor, ClusterQueue, LocalQueues) today; Volcano's
// Queue (capability) and KAI's Queue (quota, limit) are adapters beside it that read
// the same Capacity.
//
// An adapter writes only objects it owns: those with a controller ownerReference to
// the Pool's uid. An object of the queue's name without it is someone else's and is
// never changed, adopted or deleted; a label saying runwhere.ai/pool is a claim, not
// ownership.
package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Adapter is one scheduler's side of the seam.
type Adapter interface {
	// Sync makes the scheduler's objects for pool promise capacity, with a local queue
	// in each of namespaces (all: the pool admits every namespace), and returns what
	// the scheduler reports of the queue.
	Sync(ctx context.Context, pool *v1alpha1.Pool, capacity policy.Capacity, namespaces []string, all bool) (*v1alpha1.QueueStatus, error)
	// Remove deletes the objects the pool owns (its queue was turned off).
	Remove(ctx context.Context, pool *v1alpha1.Pool) error
}

// NotInstalledError says the scheduler's API is not served: nothing was changed.
type NotInstalledError struct {
	Scheduler v1alpha1.QueueScheduler
	API       string
}

func (e *NotInstalledError) Error() string {
	return fmt.Sprintf("%s is not installed: the cluster does not serve %s; litepool changed nothing (install %s, and the queue is written within a minute)", e.Scheduler, e.API, e.Scheduler)
}

// NotOwnedError says an object of the name the pool's queue needs exists and is not the
// pool's: it was left as it is.
type NotOwnedError struct {
	Kind, Namespace, Name, Pool string
}

func (e *NotOwnedError) Error() string {
	where := e.Name
	if e.Namespace != "" {
		where = e.Namespace + "/" + e.Name
	}
	return fmt.Sprintf("%s %s exists and is not pool %q's (it has no controller ownerReference to the Pool): litepool leaves it as it is; delete or rename it to let the pool's queue take the name",
		e.Kind, where, e.Pool)
}

// IsNotInstalled and IsNotOwned tell the two errors apart from the rest.
func IsNotInstalled(err error) bool {
	var e *NotInstalledError
	return errors.As(err, &e)
}

// IsNotOwned: see IsNotInstalled.
func IsNotOwned(err error) bool {
	var e *NotOwnedError
	return errors.As(err, &e)
}

// AdmittedNamespaces are the existing namespaces pool admits (rule P4: by
// spec.namespaces or spec.namespaceSelector), sorted; all says it admits every
// namespace (and names none).
func AdmittedNamespaces(pool *v1alpha1.Pool, namespaces []corev1.Namespace) (names []string, all bool) {
	if len(pool.Spec.Namespaces) == 0 && pool.Spec.NamespaceSelector == nil {
		return nil, true
	}
	info := policy.PoolInfo{Name: pool.Name, Object: pool}
	for i := range namespaces {
		ns := &namespaces[i]
		if ns.DeletionTimestamp == nil && policy.CheckPodNamespace(info, ns, ns.Name) == nil {
			names = append(names, ns.Name)
		}
	}
	slices.Sort(names)
	return names, false
}

// AdmittedShares are pool's shares (spec.queue.shares) of namespaces that exist and
// that the pool admits; skipped names the others, which get no share and take nothing
// from the pool's queue.
func AdmittedShares(pool *v1alpha1.Pool, admitted []string, all bool, namespaces []corev1.Namespace) (kept []v1alpha1.QueueShare, skipped []string) {
	exists := map[string]bool{}
	for i := range namespaces {
		if namespaces[i].DeletionTimestamp == nil {
			exists[namespaces[i].Name] = true
		}
	}
	for _, s := range pool.Spec.Queue.Shares {
		if exists[s.Namespace] && (all || slices.Contains(admitted, s.Namespace)) {
			kept = append(kept, s)
		} else {
			skipped = append(skipped, s.Namespace)
		}
	}
	return kept, skipped
}
