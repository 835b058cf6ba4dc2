// Package edit is `kubectl litepool edit pool`.
package edit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/cmd/util/editor"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// NewCmdEdit is `kubectl litepool edit NOUN NAME`.
func NewCmdEdit(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "edit",
		Short: "Edit a pool's description, tags and settings",
		Long: templates.LongDesc(`
			Edit a pool: with flags for the common changes, or in your editor.`),
		Example: templates.Examples(`
			kubectl litepool edit pool train-a100 --description "LLM pre-training"
			kubectl litepool edit pool train-a100`),
	}
	cmd.AddCommand(NewCmdEditPool(f, streams))
	return cmd
}

// EditPoolOptions is `edit pool`.
type EditPoolOptions struct {
	kit.Mutation
	Name        string
	Description string
	Tags        []string
	MinNodes    int32
	Type        string
	Exclusive   bool
	set         map[string]bool // flags given

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewEditPoolOptions returns the options of edit pool.
func NewEditPoolOptions(streams genericiooptions.IOStreams) *EditPoolOptions {
	return &EditPoolOptions{Mutation: kit.NewMutation(), IOStreams: streams}
}

// NewCmdEditPool is `kubectl litepool edit pool NAME [flags]`.
func NewCmdEditPool(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewEditPoolOptions(streams)
	cmd := &cobra.Command{
		Use:     "pool NAME",
		Aliases: []string{"pools", "lpool"},
		Short:   "Edit a pool's description, tags and settings",
		Long: templates.LongDesc(`
			Edit a Pool object (the docs' "modify pool").

			With flags, change just what they name: --description, --tag KEY=VALUE (or
			--tag KEY- to remove it), --min-nodes, --type and --exclusive. Without
			flags, the pool opens in your editor ($KUBE_EDITOR, then $EDITOR, then vi)
			as kubectl edit does; save and quit to apply, or quit without changes to
			cancel. The pool's status is not shown: litepool's controller writes it, through
			the status subresource, which an edit does not change.

			Either way the result is checked before it is written: the pool rules (R1:
			type, minNodes of at least 1, HCCL ranges, an accelerator type that cannot
			change while the pool has nodes) and node-pool labels (N1). The name
			cannot change. A pool that becomes exclusive taints its member nodes
			(runwhere.ai/pool=<name>:NoSchedule); one that stops being exclusive
			loses the taint. Changed node-pool labels and taints reach the nodes with
			kubectl litepool nodepool apply.`),
		Example: templates.Examples(`
			# Change the description and a tag
			kubectl litepool edit pool train-a100 --description "LLM pre-training" --tag team=llm

			# Keep at least two nodes through scale-downs
			kubectl litepool edit pool train-a100 --min-nodes 2

			# Edit everything else in your editor
			KUBE_EDITOR=nano kubectl litepool edit pool train-a100`),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: kit.CompletePoolNames(f),
	}
	cmd.Flags().StringVar(&o.Description, "description", "", "New description")
	cmd.Flags().StringArrayVar(&o.Tags, "tag", nil, "Set a tag (KEY=VALUE) or remove one (KEY-); repeatable")
	cmd.Flags().Int32Var(&o.MinNodes, "min-nodes", 0, "Scale-down never goes below this many nodes (at least 1)")
	cmd.Flags().StringVar(&o.Type, "type", "", "Pool type: Training, Inference, Development or Compute")
	cmd.Flags().BoolVar(&o.Exclusive, "exclusive", false, "Taint member nodes so that only the pool's pods run on them")
	o.Mutation.AddFlags(cmd, false)
	return kit.Bind(cmd, f, o)
}

// Complete reads the pool name and which flags were given, and builds the clients.
func (o *EditPoolOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	o.Name = args[0]
	o.set = map[string]bool{}
	for _, name := range []string{"description", "tag", "min-nodes", "type", "exclusive"} {
		o.set[name] = cmd.Flags().Changed(name)
	}
	o.clients, err = o.CompleteClients(f, cmd)
	return err
}

// write updates the pool. A conflict that only the Pool's status explains (the
// controller writes it as pods come and go) is no reason to refuse: the change is
// written again on the Pool as it is now. A conflict in what the user edits (spec,
// labels, annotations) is returned: someone else changed the pool.
func (o *EditPoolOptions) write(ctx context.Context, old, updated *v1alpha1.Pool) (*v1alpha1.Pool, error) {
	var written *v1alpha1.Pool
	err := nodeops.RetryOnConflict(func() (err error) {
		written, err = o.clients.Pools.Update(ctx, updated, metav1.UpdateOptions{DryRun: o.ServerDryRun()})
		if !apierrors.IsConflict(err) {
			return err
		}
		now, gerr := o.clients.Pools.Get(ctx, o.Name)
		if gerr != nil || !sameEditable(now, old) {
			return err
		}
		updated.ResourceVersion = now.ResourceVersion
		return err // a conflict: retried with the new resourceVersion
	})
	return written, err
}

// sameEditable says whether two versions of a Pool agree on what edit changes.
func sameEditable(a, b *v1alpha1.Pool) bool {
	return reflect.DeepEqual(a.Spec, b.Spec) && maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations)
}

func (o *EditPoolOptions) useFlags() bool {
	for _, v := range o.set {
		if v {
			return true
		}
	}
	return false
}

// Run reads the pool, changes it (flags or editor), checks and writes it.
func (o *EditPoolOptions) Run(ctx context.Context) error {
	cat := kit.NewCatalog(ctx, o.clients)
	old, err := o.getPool(cat)
	if err != nil {
		return err
	}
	var updated *v1alpha1.Pool
	if o.useFlags() {
		updated, err = o.applyFlags(old)
	} else {
		updated, err = o.edit(old)
	}
	if err != nil || updated == nil {
		return err
	}
	if sameEditable(old, updated) {
		return o.Print(o.Out, old, "unchanged")
	}
	members, err := cat.Members(o.Name)
	if err != nil {
		return err
	}
	nodes := make([]*corev1.Node, len(members))
	for i := range members {
		nodes[i] = &members[i]
	}
	if err := errors.Join(policy.ValidatePool(updated, old, len(members)), policy.CheckTopology(updated, old, nodes), policy.ValidateNodePools(updated)); err != nil {
		return fmt.Errorf("pool %q was not changed:\n%w", o.Name, err)
	}
	written := updated
	if o.DryRun != cmdutil.DryRunClient {
		if written, err = o.write(ctx, old, updated); err != nil {
			if apierrors.IsConflict(err) {
				return fmt.Errorf("pool %q was changed by someone else while you edited it; nothing was written: run the command again", o.Name)
			}
			return err
		}
	}
	if err := o.Print(o.Out, written, "edited"); err != nil {
		return err
	}
	ref := events.PoolRef(o.Name)
	o.Event(ctx, &ref, false, "Edited", "pool %s edited: %s", o.Name, strings.Join(changedFields(old, updated), ", "))
	if old.Spec.Exclusive != updated.Spec.Exclusive {
		return o.retaint(ctx, updated, members)
	}
	return nil
}

func (o *EditPoolOptions) getPool(cat *kit.Catalog) (*v1alpha1.Pool, error) {
	if o.Name == policy.DefaultPool {
		return nil, fmt.Errorf("the default pool has no Pool object to edit: it is the nodes that belong to no pool")
	}
	p, err := cat.Object(o.Name)
	if p != nil || err != nil {
		return p, err
	}
	if members, err := cat.Members(o.Name); err == nil && len(members) > 0 {
		return nil, fmt.Errorf("pool %q has no Pool object (it exists only as labels on %d node(s)): create one with kubectl litepool create -f, which adopts its nodes", o.Name, len(members))
	}
	return nil, kit.PoolNotFound(o.Name)
}

// applyFlags changes a copy of the pool as the flags say.
func (o *EditPoolOptions) applyFlags(old *v1alpha1.Pool) (*v1alpha1.Pool, error) {
	p := old.DeepCopy()
	if o.set["description"] {
		p.Spec.Description = o.Description
	}
	if o.set["tag"] {
		for _, t := range o.Tags {
			if key, ok := strings.CutSuffix(t, "-"); ok && !strings.Contains(t, "=") {
				delete(p.Spec.Tags, key)
				continue
			}
			key, value, ok := strings.Cut(t, "=")
			if !ok || key == "" {
				return nil, fmt.Errorf("invalid --tag %q: expected KEY=VALUE or KEY-", t)
			}
			if p.Spec.Tags == nil {
				p.Spec.Tags = map[string]string{}
			}
			p.Spec.Tags[key] = value
		}
		if len(p.Spec.Tags) == 0 {
			p.Spec.Tags = nil
		}
	}
	if o.set["min-nodes"] {
		if o.MinNodes < 1 {
			return nil, policy.Violationf("R1", "--min-nodes %d: must be at least 1", o.MinNodes)
		}
		p.Spec.MinNodes = o.MinNodes
	}
	if o.set["type"] {
		p.Spec.Type = v1alpha1.PoolType(o.Type)
	}
	if o.set["exclusive"] {
		p.Spec.Exclusive = o.Exclusive
	}
	return p, nil
}

const editHeader = `# Please edit the pool below. Lines beginning with a '#' will be ignored,
# and an empty file will abort the edit. The status is litepool's controller's
# to write (the status subresource): it is not shown here.
#
`

// edit opens the pool in the user's editor and returns what was saved, or nil when the
// edit was cancelled.
func (o *EditPoolOptions) edit(old *v1alpha1.Pool) (*v1alpha1.Pool, error) {
	shown := old.DeepCopy()
	shown.Status = v1alpha1.PoolStatus{}
	shown.ManagedFields = nil
	shown.APIVersion, shown.Kind = v1alpha1.GroupVersion.String(), "Pool"
	body, err := yaml.Marshal(shown)
	if err != nil {
		return nil, err
	}
	body = bytes.Replace(body, []byte("status: {}\n"), nil, 1)
	original := append([]byte(editHeader), body...)
	edited, path, err := editor.NewDefaultEditor([]string{"KUBE_EDITOR", "EDITOR"}).LaunchTempFile("litepool-edit-", ".yaml", bytes.NewReader(original))
	if err != nil {
		return nil, fmt.Errorf("launching the editor: %w", err)
	}
	if bytes.Equal(stripComments(edited), stripComments(original)) {
		os.Remove(path)
		fmt.Fprintln(o.ErrOut, "Edit cancelled, no changes made.")
		return nil, nil
	}
	if len(bytes.TrimSpace(stripComments(edited))) == 0 {
		os.Remove(path)
		fmt.Fprintln(o.ErrOut, "Edit cancelled, saved file was empty.")
		return nil, nil
	}
	var p v1alpha1.Pool
	if err := yaml.UnmarshalStrict(edited, &p); err != nil {
		return nil, fmt.Errorf("pool %q was not changed: the edited file is not a valid Pool: %s; your changes are in %s", o.Name, policy.DecodeErrorMessage(err), path)
	}
	if p.Name != old.Name {
		return nil, fmt.Errorf("pool %q was not changed: the name cannot change (to %q); your changes are in %s", o.Name, p.Name, path)
	}
	os.Remove(path)
	p.ResourceVersion, p.UID, p.CreationTimestamp = old.ResourceVersion, old.UID, old.CreationTimestamp
	p.Status = v1alpha1.PoolStatus{}
	return &p, nil
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.TrimSpace(bytes.Join(out, []byte("\n")))
}

// retaint adds or removes the exclusive taint on the pool's members.
func (o *EditPoolOptions) retaint(ctx context.Context, p *v1alpha1.Pool, members []corev1.Node) error {
	for _, m := range members {
		node, changed, err := nodeops.ModifyNode(ctx, o.clients.Kube, m.Name, o.DryRun, func(n *corev1.Node) error {
			if p.Spec.Exclusive {
				policy.SetTaint(n, policy.ExclusiveTaint(p.Name))
			} else {
				policy.RemoveTaints(n, func(t corev1.Taint) bool { return t.Key == policy.LabelPool })
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("pool %q was edited, but tainting its node %q failed: %w; run the command again", p.Name, m.Name, err)
		}
		if changed {
			verb := "tainted"
			if !p.Spec.Exclusive {
				verb = "untainted"
			}
			if err := o.Print(o.Out, node, verb); err != nil {
				return err
			}
		}
	}
	return nil
}

// changedFields names the spec fields an edit changed, for the event.
func changedFields(old, updated *v1alpha1.Pool) []string {
	var out []string
	a, b := reflect.ValueOf(old.Spec), reflect.ValueOf(updated.Spec)
	t := a.Type()
	for i := 0; i < t.NumField(); i++ {
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
			out = append(out, name)
		}
	}
	if !reflect.DeepEqual(old.Labels, updated.Labels) || !reflect.DeepEqual(old.Annotations, updated.Annotations) {
		out = append(out, "metadata")
	}
	return out
}
