// Package poolcreate creates pools from files: the workflow behind `kubectl litepool
// create -f`, as a library. ReadDocuments reads Pool objects, gpuctl pool files and
// gpuctl quota files; Check judges every document against the cluster before anything
// changes and reports every problem at once; Apply creates the pools, adopts pools of
// labels, joins the listed nodes and creates the quotas, and if a write fails undoes
// what it did, newest first.
package poolcreate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// Printer is where Apply reports every object it created or changed, with what
// happened to it ("created", "labeled").
type Printer interface {
	Print(obj runtime.Object, operation string) error
}

// Creator creates pools.
type Creator struct {
	Kube   kubernetes.Interface
	Pools  *poolclient.Client
	DryRun cmdutil.DryRunStrategy
	// GPUResource is the accelerator resource a gpuctl quota file's gpu limits.
	GPUResource corev1.ResourceName
	Recorder    *events.Recorder
	Printer     Printer

	planNodes map[string]*corev1.Node // the listed nodes as they were before Apply
}

// membersOf lists the nodes labelled with pool.
func membersOf(pool string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + pool}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Plan is what Apply will do once every check passed.
type Plan struct {
	docs   []Document
	nodes  map[string]*corev1.Node         // nodes listed by gpuctl files, as read
	quotas map[int][]*corev1.ResourceQuota // by index in docs: gpuctl quota files
}

// Check runs every check against the cluster before anything changes and returns all
// the problems it found at once.
func (c *Creator) Check(ctx context.Context, docs []Document) (*Plan, error) {
	var errs []error
	plan := &Plan{docs: docs, nodes: map[string]*corev1.Node{}, quotas: map[int][]*corev1.ResourceQuota{}}
	seenPool, seenNode, seenQuota := map[string]string{}, map[string]string{}, map[string]string{}
	for i, d := range docs {
		fail := func(err error) {
			for _, line := range strings.Split(err.Error(), "\n") {
				errs = append(errs, fmt.Errorf("%s: %s", d.Source, line))
			}
		}
		if d.Quota != nil {
			rqs, err := c.checkQuota(ctx, d, seenQuota)
			if err != nil {
				fail(err)
			}
			plan.quotas[i] = rqs
			continue
		}
		p := d.Pool
		if err := policy.ValidatePool(p, nil, 0); err != nil {
			fail(err)
			continue
		}
		if err := policy.ValidateNodePools(p); err != nil {
			fail(err)
		}
		if other, dup := seenPool[p.Name]; dup {
			fail(fmt.Errorf("pool %q is also defined in %s", p.Name, other))
			continue
		}
		seenPool[p.Name] = d.Source
		if _, err := c.Pools.Get(ctx, p.Name); err == nil {
			fail(apierrors.NewAlreadyExists(v1alpha1.GroupVersion.WithResource("pools").GroupResource(), p.Name))
			continue
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err := c.checkAdoption(ctx, p); err != nil {
			fail(err)
		}
		for _, gn := range d.Nodes {
			if other, dup := seenNode[gn.Name]; dup {
				fail(fmt.Errorf("node %q is also listed in %s: a node belongs to one pool", gn.Name, other))
				continue
			}
			seenNode[gn.Name] = d.Source
			node, err := c.Kube.CoreV1().Nodes().Get(ctx, gn.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				fail(fmt.Errorf("node %q listed in pool %q not found", gn.Name, p.Name))
				continue
			} else if err != nil {
				return nil, err
			}
			if err := checkGpuctlNode(p, gn, node); err != nil {
				fail(err)
				continue
			}
			plan.nodes[gn.Name] = node
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("nothing was created:\n%w", errors.Join(errs...))
	}
	return plan, nil
}

// checkAdoption is N2 for the nodes of a pool that exists so far only as labels: each
// must match the new object's accelerator; and R1 on its topology, whose floor no
// domain of those nodes may be below.
func (c *Creator) checkAdoption(ctx context.Context, p *v1alpha1.Pool) error {
	members, err := c.Kube.CoreV1().Nodes().List(ctx, membersOf(p.Name))
	if err != nil {
		return err
	}
	nodes := make([]*corev1.Node, len(members.Items))
	for i := range members.Items {
		nodes[i] = &members.Items[i]
	}
	return errors.Join(policy.CheckAdoption(p, nodes), policy.CheckTopology(p, nil, nodes))
}

// checkGpuctlNode checks a node a gpuctl file lists: it is in the default pool (or
// already in this one), its gpu-type label (if any) is the one the file declares, and
// it matches the pool (N2).
func checkGpuctlNode(p *v1alpha1.Pool, gn policy.GpuctlNode, node *corev1.Node) error {
	if from := policy.PoolOf(node); from != policy.DefaultPool && from != p.Name {
		return policy.Violationf("S1", "node %q belongs to pool %q: remove it from %q first (kubectl litepool scale %s --remove %s)",
			node.Name, from, from, from, node.Name)
	}
	for _, key := range gpuTypeKeys {
		if have, ok := node.Labels[key]; ok && have != gn.GPUType {
			return policy.Violationf("N2", "node %q is labelled %s=%s but the pool file declares gpu-type %q for it",
				node.Name, key, have, gn.GPUType)
		}
	}
	if err := policy.CheckDeclaredGPUType(node, gn.GPUType); err != nil {
		return err
	}
	after := node.DeepCopy()
	policy.ApplyJoin(p, after)
	return policy.CheckJoin(p, after)
}

// gpuTypeKeys are the node labels a join writes the gpu-type to (policy.ApplyJoin):
// litepool's, and gpuctl's runwhere.ai/gpuType, which gpuctl's pods select on.
var gpuTypeKeys = []string{policy.LabelGPUType, policy.LabelGPUTypeCamel}

// Apply creates the pools (and quotas) and labels the nodes, undoing what it did if a
// write fails.
func (c *Creator) Apply(ctx context.Context, plan *Plan) error {
	c.planNodes = plan.nodes
	var undo []func(context.Context) error
	rollback := func(cause error) error {
		ctx, cancel := interrupt.RollbackContext(ctx)
		defer cancel()
		var failed []error
		for i := len(undo) - 1; i >= 0; i-- {
			if err := undo[i](ctx); err != nil {
				failed = append(failed, err)
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("%w; undoing what was done also failed: %v", cause, errors.Join(failed...))
		}
		return fmt.Errorf("%w; what was done has been undone", cause)
	}
	for i, d := range plan.docs {
		if d.Quota != nil {
			if err := c.applyQuota(ctx, plan.quotas[i], &undo); err != nil {
				return rollback(err)
			}
			continue
		}
		if err := c.createPool(ctx, d.Pool); err != nil {
			return rollback(err)
		}
		name := d.Pool.Name
		undo = append(undo, func(ctx context.Context) error {
			return c.Pools.Delete(ctx, name, metav1.DeleteOptions{DryRun: nodeops.ServerDryRun(c.DryRun)})
		})
		if err := c.Printer.Print(d.Pool, "created"); err != nil {
			return err
		}
		if err := c.adopt(ctx, d.Pool, &undo); err != nil {
			return rollback(err)
		}
		for _, gn := range d.Nodes {
			node, changed, err := c.join(ctx, d.Pool, gn)
			if err != nil {
				return rollback(err)
			}
			if changed {
				pool, gn := d.Pool, gn
				undo = append(undo, func(ctx context.Context) error { return c.unjoin(ctx, pool, gn) })
				if err := c.Printer.Print(node, "labeled"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (c *Creator) createPool(ctx context.Context, p *v1alpha1.Pool) error {
	if c.DryRun == cmdutil.DryRunClient {
		return nil
	}
	_, err := c.Pools.Create(ctx, p, metav1.CreateOptions{DryRun: nodeops.ServerDryRun(c.DryRun)})
	return err
}

// adopt gives the nodes of a pool that existed only as labels what membership of the new
// object means beyond the label: the taint of an exclusive pool.
func (c *Creator) adopt(ctx context.Context, p *v1alpha1.Pool, undo *[]func(context.Context) error) error {
	if !p.Spec.Exclusive {
		return nil
	}
	members, err := c.Kube.CoreV1().Nodes().List(ctx, membersOf(p.Name))
	if err != nil {
		return err
	}
	taint := policy.ExclusiveTaint(p.Name)
	for _, m := range members.Items {
		node, changed, err := nodeops.ModifyNode(ctx, c.Kube, m.Name, c.DryRun, func(n *corev1.Node) error {
			policy.SetTaint(n, taint)
			return nil
		})
		if err != nil {
			return err
		}
		if changed {
			name := m.Name
			*undo = append(*undo, func(ctx context.Context) error {
				_, _, err := nodeops.ModifyNode(ctx, c.Kube, name, c.DryRun, func(n *corev1.Node) error {
					policy.RemoveTaints(n, func(t corev1.Taint) bool { return t == taint })
					return nil
				})
				return err
			})
			if err := c.Printer.Print(node, "tainted"); err != nil {
				return err
			}
		}
	}
	return nil
}

// join makes a gpuctl file's node a member of the pool.
func (c *Creator) join(ctx context.Context, p *v1alpha1.Pool, gn policy.GpuctlNode) (*corev1.Node, bool, error) {
	node, changed, err := nodeops.ModifyNode(ctx, c.Kube, gn.Name, c.DryRun, func(n *corev1.Node) error {
		if err := checkGpuctlNode(p, gn, n); err != nil { // it may have changed since the check
			return err
		}
		policy.ApplyJoin(p, n)
		return nil
	})
	if err == nil && changed && c.Recorder != nil {
		_ = c.Recorder.Normal(ctx, events.NodeRef(node).About(events.PoolRef(p.Name)), "AddedToPool",
			"node %s added to pool %s (kubectl litepool create)", gn.Name, p.Name)
	}
	return node, changed, err
}

// unjoin undoes join: the node leaves the pool and loses the gpu-type labels create set.
func (c *Creator) unjoin(ctx context.Context, p *v1alpha1.Pool, gn policy.GpuctlNode) error {
	before := c.nodeBefore(gn.Name)
	_, _, err := nodeops.ModifyNode(ctx, c.Kube, gn.Name, c.DryRun, func(n *corev1.Node) error {
		policy.ApplyLeave(p, n)
		if before != nil {
			for _, key := range gpuTypeKeys {
				if _, had := before.Labels[key]; !had {
					delete(n.Labels, key)
				}
			}
			if v, had := before.Labels[policy.LabelPool]; had {
				n.Labels[policy.LabelPool] = v
			}
		}
		return nil
	})
	return err
}

func (c *Creator) nodeBefore(name string) *corev1.Node { return c.planNodes[name] }

// checkQuota parses a gpuctl quota file and checks it against the cluster: no namespace
// gets a second gpuctl quota (gpuctl allows one per namespace), none is named twice.
func (c *Creator) checkQuota(ctx context.Context, d Document, seen map[string]string) ([]*corev1.ResourceQuota, error) {
	rqs, err := policy.ParseGpuctlQuota(d.Quota, c.GPUResource)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, rq := range rqs {
		if other, dup := seen[rq.Namespace]; dup {
			errs = append(errs, fmt.Errorf("namespace %q also has a quota in %s: a namespace has one gpuctl quota", rq.Namespace, other))
			continue
		}
		seen[rq.Namespace] = d.Source
		existing, err := c.Kube.CoreV1().ResourceQuotas(rq.Namespace).List(ctx, metav1.ListOptions{LabelSelector: policy.LabelQuota})
		if err != nil {
			return nil, err
		}
		for _, e := range existing.Items {
			errs = append(errs, fmt.Errorf("namespace %q already has gpuctl quota %q (resourcequota/%s): a namespace has one; delete it first (kubectl delete resourcequota -n %s %s)",
				rq.Namespace, e.Labels[policy.LabelQuota], e.Name, rq.Namespace, e.Name))
		}
	}
	return rqs, errors.Join(errs...)
}

// applyQuota creates the namespaces a quota file names that do not exist yet (labelled as
// gpuctl labels its namespaces) and the ResourceQuotas, recording how to undo each.
func (c *Creator) applyQuota(ctx context.Context, rqs []*corev1.ResourceQuota, undo *[]func(context.Context) error) error {
	for _, rq := range rqs {
		if err := c.ensureNamespace(ctx, rq.Namespace, undo); err != nil {
			return err
		}
		if c.DryRun != cmdutil.DryRunClient {
			if _, err := c.Kube.CoreV1().ResourceQuotas(rq.Namespace).Create(ctx, rq, metav1.CreateOptions{DryRun: nodeops.ServerDryRun(c.DryRun)}); err != nil {
				return err
			}
		}
		ns, name := rq.Namespace, rq.Name
		*undo = append(*undo, func(ctx context.Context) error {
			return ignoreNotFound(c.Kube.CoreV1().ResourceQuotas(ns).Delete(ctx, name, metav1.DeleteOptions{DryRun: nodeops.ServerDryRun(c.DryRun)}))
		})
		if err := c.Printer.Print(rq, "created (namespace "+rq.Namespace+")"); err != nil {
			return err
		}
	}
	return nil
}

func (c *Creator) ensureNamespace(ctx context.Context, name string, undo *[]func(context.Context) error) error {
	_, err := c.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelNamespace: policy.GpuctlNamespaceMarker}}}
	if c.DryRun != cmdutil.DryRunClient {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{DryRun: nodeops.ServerDryRun(c.DryRun)}); err != nil {
			return err
		}
	}
	*undo = append(*undo, func(ctx context.Context) error {
		return ignoreNotFound(c.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{DryRun: nodeops.ServerDryRun(c.DryRun)}))
	})
	return c.Printer.Print(ns, "created")
}
