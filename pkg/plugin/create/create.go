// Package create is `kubectl litepool create -f`; the workflow is pkg/poolcreate.
package create

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/poolcreate"
)

// CreateOptions is `create -f`.
type CreateOptions struct {
	kit.Mutation
	Filenames []string
	Recursive bool
	// GPUResource is the accelerator resource a gpuctl quota file's gpu limits.
	GPUResource string

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdCreate is `kubectl litepool create -f FILE...`.
func NewCmdCreate(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &CreateOptions{Mutation: kit.NewMutation(), IOStreams: streams}
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
	}
	kit.Bind(cmd, f, o)
	cmd.Flags().StringSliceVarP(&o.Filenames, "filename", "f", nil, "Files, directories or - (standard input) holding the pools to create")
	cmd.Flags().BoolVarP(&o.Recursive, "recursive", "R", false, "Process the directory used in -f recursively")
	cmd.Flags().StringVar(&o.GPUResource, "gpu-resource", "nvidia.com/gpu", "The accelerator resource the gpu limits of gpuctl quota files count")
	o.Mutation.AddFlags(cmd, false)
	return cmd
}

// Complete refuses arguments (files come with -f) and builds the clients.
func (o *CreateOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %v: name files with -f", args)
	}
	if len(o.Filenames) == 0 {
		return fmt.Errorf("must specify one of -f: kubectl litepool create -f FILE")
	}
	o.clients, err = o.CompleteClients(f, cmd)
	return err
}

// Validate checks -o.
func (o *CreateOptions) Validate() error { return o.Mutation.Validate() }

// Run reads, checks, then creates (pkg/poolcreate).
func (o *CreateOptions) Run(ctx context.Context) error {
	docs, err := poolcreate.ReadDocuments(o.Filenames, o.Recursive, o.In)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return fmt.Errorf("no objects passed to create")
	}
	c := &poolcreate.Creator{
		Kube: o.clients.Kube, Pools: o.clients.Pools, DryRun: o.DryRun, GPUResource: corev1.ResourceName(o.GPUResource),
		Recorder: o.Recorder, Printer: kit.Printer{Mutation: &o.Mutation, IOStreams: o.IOStreams},
	}
	plan, err := c.Check(ctx, docs)
	if err != nil {
		return err
	}
	return c.Apply(ctx, plan)
}
