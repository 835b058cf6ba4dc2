package admission

import (
	"context"
	"errors"
	"fmt"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"hash/fnv"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Departures serialises the changes that can break a pool's minNodes floor (a member's
// pool label removed or changed, a member deleted), as the eviction API does with a
// PodDisruptionBudget's status: each pool has one ConfigMap in the webhook's namespace
// listing the nodes granted a departure, each with an expiry. A departure is judged
// against the members the informer cache shows less the departures already granted,
// and granted by updating the ConfigMap at the resourceVersion it was judged on; a
// concurrent grant (by any replica) makes the update conflict, and the departure is
// judged again on the new list. Grants of departures that never committed (denied by
// another webhook, or the client gave up) expire after TTL, as the disruption
// controller clears a PDB's stale disruptedPods; until then they only make the floor
// stricter. Every read is live (never from a cache).
type Departures struct {
	// Client reads and writes the ConfigMaps; it must not be a cached client.
	Client client.Client
	// Namespace holds the ConfigMaps (the webhook's own).
	Namespace string
	// TTL is how long a grant counts after it was made: longer than any informer
	// cache's lag, so that a committed departure is out of every replica's cache
	// before its grant expires.
	TTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultDepartureTTL is the grant lifetime the webhook uses unless told otherwise.
const DefaultDepartureTTL = 3 * time.Minute

// departuresPrefix starts the name of every pool's reservation ConfigMap.
const departuresPrefix = "litepool-departures-"

// LabelDepartures marks the reservation ConfigMaps (kubectl get cm -l ...).
const LabelDepartures = policy.LabelDeparturesOf

// conflictBackoff retries a grant that lost a race: many departures from one pool at
// once conflict in turn, so it tries more often than retry.DefaultRetry, every 10-20 ms
// (jitter spreads the contenders). The wait does not grow: a request that has lost a few
// times would wait longest and keep losing to newer ones, and a wait.Backoff with a Cap
// stops once it reaches it (8 departures at a time starved one that way in
// bench/webhook). The request's own context (the API server's webhook timeout) bounds
// the tries, not a count.
var conflictBackoff = wait.Backoff{Steps: math.MaxInt32, Duration: 10 * time.Millisecond, Factor: 1, Jitter: 1}

// maxGrantTime bounds Grant when its context has no deadline: longer than any webhook
// timeout (at most 30 s in the API server; deploy sets 3 s), so it never cuts a request
// the API server still waits for.
const maxGrantTime = 30 * time.Second

// ConfigMapName is the reservation ConfigMap of pool. Pool label values may hold
// characters an object name may not (upper case, underscores); those pools get a hash.
func ConfigMapName(pool string) string {
	name := departuresPrefix + pool
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(pool))
	return fmt.Sprintf("%sx%016x", departuresPrefix, h.Sum64())
}

// Denied is a departure the rules refused (as opposed to one that could not be judged).
type Denied struct{ Err error }

func (d *Denied) Error() string { return d.Err.Error() }
func (d *Denied) Unwrap() error { return d.Err }

// Grant judges node's departure from pool and, when judge allows it, records the grant
// (unless dryRun). judge receives the unexpired grants of other nodes' departures (and
// node's own, when a retry of the same request finds it granted already). It returns a
// *Denied when judge refuses, another error when the reservation could not be read or
// written (the departure must then be refused too: its failure policy is Fail).
func (d *Departures) Grant(ctx context.Context, pool, node string, dryRun bool, judge func(granted map[string]bool) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, maxGrantTime)
		defer cancel()
	}
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, conflictBackoff, func(ctx context.Context) (bool, error) {
		if last = d.grantOnce(ctx, pool, node, dryRun, judge); retriable(last) {
			return false, nil
		}
		return true, last
	})
	if wait.Interrupted(err) && last != nil {
		return last // the request's time ran out: the last conflict says why
	}
	return err
}

// grantOnce is one try of Grant, at the reservation's current version.
func (d *Departures) grantOnce(ctx context.Context, pool, node string, dryRun bool, judge func(granted map[string]bool) error) error {
	cm, found, err := d.get(ctx, pool)
	if err != nil {
		return err
	}
	now := d.now()
	granted := unexpired(cm, now)
	if err := judge(granted); err != nil {
		return &Denied{Err: err}
	}
	if dryRun || granted[node] {
		return nil
	}
	d.record(cm, granted, node, now)
	if !found {
		err := d.Client.Create(ctx, cm)
		countDepartureCall("create", err)
		return err
	}
	err = d.Client.Update(ctx, cm) // at the resourceVersion read: conflicts if another grant came first
	countDepartureCall("update", err)
	return err
}

// Release drops node's grant from pool's reservation, if it holds one (the node
// rejoined the pool, so its departure is over).
func (d *Departures) Release(ctx context.Context, pool, node string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, found, err := d.get(ctx, pool)
		if err != nil || !found {
			return err
		}
		if _, ok := cm.Data[node]; !ok {
			return nil
		}
		delete(cm.Data, node)
		return d.Client.Update(ctx, cm)
	})
}

// retriable: another grant came first (update conflict, or a create of the same
// ConfigMap), so the departure is judged again on the new list.
func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

func (d *Departures) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// get reads pool's ConfigMap live; a missing one is returned empty, to be created.
func (d *Departures) get(ctx context.Context, pool string) (*corev1.ConfigMap, bool, error) {
	cm := &corev1.ConfigMap{}
	err := d.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: ConfigMapName(pool)}, cm)
	countDepartureCall("get", err)
	switch {
	case err == nil:
		return cm, true, nil
	case apierrors.IsNotFound(err):
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: ConfigMapName(pool),
			Labels:      map[string]string{LabelDepartures: ConfigMapName(pool)[len(departuresPrefix):]},
			Annotations: map[string]string{policy.AnnotationPoolName: pool}}}, false, nil
	default:
		return nil, false, fmt.Errorf("reading the departures of pool %q (ConfigMap %s/%s): %w", pool, d.Namespace, ConfigMapName(pool), err)
	}
}

// unexpired are the nodes whose grant has not expired at now. A value that does not
// parse counts as granted: a stricter floor, never a looser one.
func unexpired(cm *corev1.ConfigMap, now time.Time) map[string]bool {
	out := map[string]bool{}
	for n, v := range cm.Data {
		if t, err := time.Parse(time.RFC3339Nano, v); err != nil || now.Before(t) {
			out[n] = true
		}
	}
	return out
}

// record writes the grants back: the unexpired ones (the expired are pruned) and node's.
func (d *Departures) record(cm *corev1.ConfigMap, granted map[string]bool, node string, now time.Time) {
	data := make(map[string]string, len(granted)+1)
	for n := range granted {
		data[n] = cm.Data[n]
	}
	data[node] = now.Add(d.TTL).UTC().Format(time.RFC3339Nano)
	cm.Data = data
}

// GrantedNodes lists the unexpired grants of pool, sorted (for tests and tools).
func (d *Departures) GrantedNodes(ctx context.Context, pool string) ([]string, error) {
	cm, _, err := d.get(ctx, pool)
	if err != nil {
		return nil, err
	}
	var out []string
	for n := range unexpired(cm, d.now()) {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// IsDenied says whether err is a refusal by the rules.
func IsDenied(err error) bool {
	var d *Denied
	return errors.As(err, &d)
}
