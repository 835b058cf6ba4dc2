package plugin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var _ = register(NewCmdCreate)

// CreateOptions is `create -f`.
type CreateOptions struct {
	kit.Mutation
	Filenames []string
	Recursive bool
	// GPUResource is the accelerator resource a gpuctl quota file's gpu limits.
	GPUResource string

	clients   *kit.Clients
	planNodes map[string]*corev1.Node // the listed nodes as they were before create
	genericiooptions.IOStreams
}

// NewCmdCreate is `kubectl litepool create -f FILE...`.
func NewCmdCreate(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &CreateOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "create -f FILE",
		Short: "Create pools from Pool objects or gpuctl pool files, and quotas from gpuctl quota files",
		Long: templates.LongDesc(`
			Create pools from files: Pool objects (apiVersion: runwhere.ai/v1alpha1,
			kind: Pool) and gpuctl's pool files (kind: pool or resource, version: v0.1,
			with pool.name, pool.description and nodes.<node>.gpu-type, the nodes at the
			top level or under pool, the type written gpu-type, gpuType or gpu_type).
			gpuctl's quota files (kind: quota) make one ResourceQuota per namespace,
			<quota>-<namespace>, limiting requests.cpu, requests.memory and
			requests.<--gpu-resource>; a missing namespace is created with gpuctl's
			label runwhere.ai/namespace=true.
			Several files (-f more than once, a directory, or - for standard input) and
			several documents per file (separated by ---) are created together.

			For a gpuctl pool file the Pool object takes the file's name, description
			and gpu-type, and every listed node joins the pool: it gets the label
			runwhere.ai/pool (and runwhere.ai/gpu-type and gpuctl's runwhere.ai/gpuType,
			which gpuctl's pods select on, when it has none). A gpu-type
			that contradicts what the node's device plugin reports
			(nvidia.com/gpu.product, the Ascend chip labels) is refused, never written.
			A pool that so far exists only as node labels is adopted: its object is
			created and its nodes stay.

			Everything is checked before anything changes: the pool rules (R1), the
			node labels (N1), the accelerator of every node joining (N2), nodes that
			belong to another pool or are listed twice, pools that already exist. If a
			write fails half-way, what was done is undone.`),
		Example: templates.Examples(`
			# Create the pools of gpuctl's four-pool plan
			kubectl litepool create -f training-pool.yaml -f inference-pool.yaml -f dev-pool.yaml -f compute-pool.yaml

			# Every pool file of a directory, checked by the API server but not stored
			kubectl litepool create -f pools/ --dry-run=server

			# gpuctl's per-namespace quotas, with Ascend NPUs as the "gpu"
			kubectl litepool create -f quota.yaml --gpu-resource huawei.com/Ascend910

			# A Pool object from standard input
			kubectl litepool create -f - < pool.yaml`),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unexpected arguments %v: name files with -f", args)
			}
			if len(o.Filenames) == 0 {
				return fmt.Errorf("must specify one of -f: kubectl litepool create -f FILE")
			}
			c, err := f.Clients()
			if err != nil {
				return err
			}
			o.clients = c
			if err := o.Mutation.Complete(cmd, c); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringSliceVarP(&o.Filenames, "filename", "f", nil, "Files, directories or - (standard input) holding the pools to create")
	cmd.Flags().BoolVarP(&o.Recursive, "recursive", "R", false, "Process the directory used in -f recursively")
	cmd.Flags().StringVar(&o.GPUResource, "gpu-resource", "nvidia.com/gpu", "The accelerator resource the gpu limits of gpuctl quota files count")
	cmdutil.AddDryRunFlag(cmd)
	return cmd
}

// poolDoc is one pool to create, from one document.
type poolDoc struct {
	source string // "file" or "file: document N"
	pool   *v1alpha1.Pool
	nodes  []policy.GpuctlNode // gpuctl files only
	quota  []byte              // a gpuctl quota file (then pool is nil)
}

// Run reads, checks, then creates.
func (o *CreateOptions) Run(ctx context.Context) error {
	docs, err := ReadPoolDocuments(o.Filenames, o.Recursive, o.In)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return fmt.Errorf("no objects passed to create")
	}
	plan, err := o.check(ctx, docs)
	if err != nil {
		return err
	}
	o.planNodes = plan.nodes
	return o.apply(ctx, plan)
}

// ReadPoolDocuments reads and parses every document of the files (a directory: its
// .yaml, .yml and .json files; "-": in).
func ReadPoolDocuments(filenames []string, recursive bool, in io.Reader) ([]poolDoc, error) {
	var docs []poolDoc
	for _, name := range filenames {
		files, err := expandFile(name, recursive)
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			raw, err := readDocuments(file, in)
			if err != nil {
				return nil, err
			}
			for i, doc := range raw {
				source := file
				if len(raw) > 1 {
					source = fmt.Sprintf("%s: document %d", file, i+1)
				}
				d, err := parsePoolDocument(doc)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", source, err)
				}
				d.source = source
				docs = append(docs, d)
			}
		}
	}
	return docs, nil
}

func expandFile(name string, recursive bool) ([]string, error) {
	if name == "-" {
		return []string{"-"}, nil
	}
	info, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("the path %q does not exist", name)
	}
	if !info.IsDir() {
		return []string{name}, nil
	}
	var files []string
	err = filepath.WalkDir(name, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != name && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// readDocuments splits a file into its non-empty YAML documents.
func readDocuments(file string, in io.Reader) ([][]byte, error) {
	r := in
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	} else if in == nil {
		return nil, fmt.Errorf("-f -: no standard input")
	}
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs [][]byte
	for {
		doc, err := yr.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if isEmptyDocument(doc) {
			continue
		}
		docs = append(docs, doc)
	}
}

func isEmptyDocument(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		l := strings.TrimSpace(string(line))
		if l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return false
		}
	}
	return true
}

// parsePoolDocument tells a Pool object from a gpuctl pool file and parses it strictly.
func parsePoolDocument(doc []byte) (poolDoc, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return poolDoc{}, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	switch {
	case head.APIVersion == "" && head.Kind == policy.GpuctlQuotaKind:
		return poolDoc{quota: doc}, nil
	case policy.IsGpuctlDocument(head.Kind, head.APIVersion):
		g, err := policy.ParseGpuctlPool(doc)
		if err != nil {
			return poolDoc{}, err
		}
		return poolDoc{pool: g.Pool, nodes: g.Nodes}, nil
	case head.APIVersion == v1alpha1.GroupVersion.String() && head.Kind == "Pool":
		var p v1alpha1.Pool
		if err := yaml.UnmarshalStrict(doc, &p); err != nil {
			return poolDoc{}, fmt.Errorf("not a valid Pool: %s", policy.DecodeErrorMessage(err))
		}
		p.Status = v1alpha1.PoolStatus{}
		p.ResourceVersion, p.UID = "", ""
		return poolDoc{pool: &p}, nil
	}
	return poolDoc{}, fmt.Errorf("unsupported document (apiVersion %q, kind %q): create -f takes Pool objects (apiVersion: %s, kind: Pool), gpuctl pool files (kind: pool, version: %s) and gpuctl quota files (kind: quota)",
		head.APIVersion, head.Kind, v1alpha1.GroupVersion.String(), policy.GpuctlVersion)
}

// createPlan is what create will do once every check passed.
type createPlan struct {
	docs   []poolDoc
	nodes  map[string]*corev1.Node         // nodes listed by gpuctl files, as read
	quotas map[int][]*corev1.ResourceQuota // by index in docs: gpuctl quota files
}

// check runs every check against the cluster before anything changes and returns all
// the problems it found at once.
func (o *CreateOptions) check(ctx context.Context, docs []poolDoc) (*createPlan, error) {
	var errs []error
	plan := &createPlan{docs: docs, nodes: map[string]*corev1.Node{}, quotas: map[int][]*corev1.ResourceQuota{}}
	seenPool, seenNode, seenQuota := map[string]string{}, map[string]string{}, map[string]string{}
	for i, d := range docs {
		fail := func(err error) {
			for _, line := range strings.Split(err.Error(), "\n") {
				errs = append(errs, fmt.Errorf("%s: %s", d.source, line))
			}
		}
		if d.quota != nil {
			rqs, err := o.checkQuota(ctx, d, seenQuota)
			if err != nil {
				fail(err)
			}
			plan.quotas[i] = rqs
			continue
		}
		p := d.pool
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
		seenPool[p.Name] = d.source
		if _, err := o.clients.Pools.Get(ctx, p.Name); err == nil {
			fail(apierrors.NewAlreadyExists(v1alpha1.GroupVersion.WithResource("pools").GroupResource(), p.Name))
			continue
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err := o.checkAdoption(ctx, p); err != nil {
			fail(err)
		}
		for _, gn := range d.nodes {
			if other, dup := seenNode[gn.Name]; dup {
				fail(fmt.Errorf("node %q is also listed in %s: a node belongs to one pool", gn.Name, other))
				continue
			}
			seenNode[gn.Name] = d.source
			node, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, gn.Name, metav1.GetOptions{})
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
// must match the new object's accelerator.
func (o *CreateOptions) checkAdoption(ctx context.Context, p *v1alpha1.Pool) error {
	members, err := o.clients.Kube.CoreV1().Nodes().List(ctx, kit.ListBySelector(kit.PoolSelector(p.Name)))
	if err != nil {
		return err
	}
	nodes := make([]*corev1.Node, len(members.Items))
	for i := range members.Items {
		nodes[i] = &members.Items[i]
	}
	return policy.CheckAdoption(p, nodes)
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
	setGPUTypeIfAbsent(after, gn.GPUType)
	return policy.CheckJoin(p, after)
}

// gpuTypeKeys are the node labels a gpuctl file's gpu-type is written to: litepool's,
// and gpuctl's runwhere.ai/gpuType, which gpuctl's pods select on (gpuctl's own pool
// create writes only gpu-type, so its pods that name a GPU type could not schedule).
var gpuTypeKeys = []string{policy.LabelGPUType, policy.LabelGPUTypeCamel}

func setGPUTypeIfAbsent(n *corev1.Node, gpuType string) {
	if gpuType == "" {
		return
	}
	for _, key := range gpuTypeKeys {
		if _, ok := n.Labels[key]; ok {
			continue
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[key] = gpuType
	}
}

// apply creates the pools and labels the nodes, undoing what it did if a write fails.
func (o *CreateOptions) apply(ctx context.Context, plan *createPlan) error {
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
		if d.quota != nil {
			if err := o.applyQuota(ctx, plan.quotas[i], &undo); err != nil {
				return rollback(err)
			}
			continue
		}
		if err := o.createPool(ctx, d.pool); err != nil {
			return rollback(err)
		}
		name := d.pool.Name
		undo = append(undo, func(ctx context.Context) error {
			return o.clients.Pools.Delete(ctx, name, metav1.DeleteOptions{DryRun: kit.ServerDryRun(o.DryRun)})
		})
		fmt.Fprintf(o.Out, "pool.runwhere.ai/%s created%s\n", name, o.Suffix())
		if err := o.adopt(ctx, d.pool, &undo); err != nil {
			return rollback(err)
		}
		for _, gn := range d.nodes {
			changed, err := o.join(ctx, d.pool, gn)
			if err != nil {
				return rollback(err)
			}
			if changed {
				pool, gn := d.pool, gn
				undo = append(undo, func(ctx context.Context) error { return o.unjoin(ctx, pool, gn) })
				fmt.Fprintf(o.Out, "node/%s labeled%s\n", gn.Name, o.Suffix())
			}
		}
	}
	return nil
}

func (o *CreateOptions) createPool(ctx context.Context, p *v1alpha1.Pool) error {
	if o.DryRun == cmdutil.DryRunClient {
		return nil
	}
	_, err := o.clients.Pools.Create(ctx, p, metav1.CreateOptions{DryRun: kit.ServerDryRun(o.DryRun)})
	return err
}

// adopt gives the nodes of a pool that existed only as labels what membership of the new
// object means beyond the label: the taint of an exclusive pool.
func (o *CreateOptions) adopt(ctx context.Context, p *v1alpha1.Pool, undo *[]func(context.Context) error) error {
	if !p.Spec.Exclusive {
		return nil
	}
	members, err := o.clients.Kube.CoreV1().Nodes().List(ctx, kit.ListBySelector(kit.PoolSelector(p.Name)))
	if err != nil {
		return err
	}
	taint := policy.ExclusiveTaint(p.Name)
	for _, m := range members.Items {
		_, changed, err := kit.UpdateNode(ctx, o.clients, m.Name, o.DryRun, func(n *corev1.Node) error {
			policy.SetTaint(n, taint)
			return nil
		})
		if err != nil {
			return err
		}
		if changed {
			name := m.Name
			*undo = append(*undo, func(ctx context.Context) error {
				_, _, err := kit.UpdateNode(ctx, o.clients, name, o.DryRun, func(n *corev1.Node) error {
					policy.RemoveTaints(n, func(t corev1.Taint) bool { return t == taint })
					return nil
				})
				return err
			})
			fmt.Fprintf(o.Out, "node/%s tainted%s\n", m.Name, o.Suffix())
		}
	}
	return nil
}

// join makes a gpuctl file's node a member of the pool.
func (o *CreateOptions) join(ctx context.Context, p *v1alpha1.Pool, gn policy.GpuctlNode) (bool, error) {
	node, changed, err := kit.UpdateNode(ctx, o.clients, gn.Name, o.DryRun, func(n *corev1.Node) error {
		if err := checkGpuctlNode(p, gn, n); err != nil { // it may have changed since the check
			return err
		}
		setGPUTypeIfAbsent(n, gn.GPUType)
		policy.ApplyJoin(p, n)
		return nil
	})
	if err == nil && changed && o.Recorder != nil {
		_ = o.Recorder.Normal(ctx, events.NodeRef(node).About(events.PoolRef(p.Name)), "AddedToPool",
			"node %s added to pool %s (kubectl litepool create)", gn.Name, p.Name)
	}
	return changed, err
}

// unjoin undoes join: the node leaves the pool and loses the gpu-type labels create set.
func (o *CreateOptions) unjoin(ctx context.Context, p *v1alpha1.Pool, gn policy.GpuctlNode) error {
	before := o.nodeBefore(gn.Name)
	_, _, err := kit.UpdateNode(ctx, o.clients, gn.Name, o.DryRun, func(n *corev1.Node) error {
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

func (o *CreateOptions) nodeBefore(name string) *corev1.Node { return o.planNodes[name] }
