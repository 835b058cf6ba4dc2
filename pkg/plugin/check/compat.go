// Package check is `kubectl litepool check`: the compatibility matrix checks
// (pkg/compat). The matrix flags and the tables are the kit's, shared with `upgrade
// driver`'s pre-flight.
package check

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/compat"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// NewCmdCheck is `kubectl litepool check`.
func NewCmdCheck(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check a pool or a set of versions against the compatibility matrix",
		Long: templates.LongDesc(`
			Check that the versions a pool runs, or versions you name, fit together
			according to the compatibility matrix shipped with litepool.`),
		Example: templates.Examples(`
			# Check the version chain of a pool's nodes and its declared software
			kubectl litepool check compat --pool train-snt9b`),
	}
	cmd.AddCommand(NewCmdCheckCompat(f, streams))
	return cmd
}

// CheckCompatOptions is `check compat`.
type CheckCompatOptions struct {
	Pool   string
	Chain  compat.Chain
	Output *kit.DataOutput
	Compat kit.CompatSourceFlags

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdCheckCompat is `kubectl litepool check compat`.
func NewCmdCheckCompat(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &CheckCompatOptions{IOStreams: streams, Output: kit.NewDataOutput("wide")}
	cmd := &cobra.Command{
		Use:   "compat (--pool POOL | --hardware MODEL --driver VERSION ...)",
		Short: "Check a version chain (hardware, driver, firmware, CANN, torch_npu, image) for compatibility",
		Long: templates.LongDesc(`
			Check the chain hardware → driver → firmware → CANN → torch_npu → image
			(Ascend) or GPU → driver → CUDA → PyTorch → image (NVIDIA) against the
			compatibility matrix, and print a verdict and a reason for each link.

			With --pool, the hardware and driver come from the pool's nodes (one chain
			per distinct model and driver) and the rest from the pool's declared
			spec.software; flags given with --pool replace those values, to ask "what
			if". Without --pool, give the versions as flags.

			A version the matrix does not know is reported as unknown, never as
			compatible. The command exits non-zero unless every chain is compatible.
			The matrix is the one embedded in litepool unless --compat-file or
			--compat-configmap names another.`),
		Example: templates.Examples(`
			# The chain of a pool, from its nodes' labels and its spec.software
			kubectl litepool check compat --pool train-snt9b

			# Would driver 24.1.0.3 fit the pool's CANN?
			kubectl litepool check compat --pool train-snt9b --driver 24.1.0.3

			# Explicit Ascend versions
			kubectl litepool check compat --hardware Snt9B --driver 24.1.0.3 --firmware 7.5.0.5.220 --cann 8.2.RC1 --torch-npu 2.5.1.post1

			# An NVIDIA chain, as JSON
			kubectl litepool check compat --hardware A100 --driver 535.104.05 --cuda 12.2 --pytorch 2.3 -o json

			# Against a site's own matrix kept in a ConfigMap
			kubectl litepool check compat --pool train-a100 --compat-configmap litepool-system/compat-matrix`),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Pool, "pool", "", "Pool whose nodes and declared software to check")
	fl.StringVar(&o.Chain.Hardware, "hardware", "", "Accelerator model (Snt9B, A100, ...)")
	fl.StringVar(&o.Chain.Driver, "driver", "", "Driver version")
	fl.StringVar(&o.Chain.Firmware, "firmware", "", "Firmware version (Ascend)")
	fl.StringVar(&o.Chain.CANN, "cann", "", "CANN version (Ascend)")
	fl.StringVar(&o.Chain.TorchNPU, "torch-npu", "", "torch_npu version (Ascend)")
	fl.StringVar(&o.Chain.PyTorch, "pytorch", "", "PyTorch version")
	fl.StringVar(&o.Chain.CUDA, "cuda", "", "CUDA version (NVIDIA)")
	fl.StringVar(&o.Chain.Image, "image", "", "Container image")
	o.Output.AddFlags(cmd)
	o.Compat.AddFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return kit.Bind(cmd, f, o)
}

// Complete refuses arguments and builds the clients when the command reads the
// cluster (--pool, --compat-configmap).
func (o *CheckCompatOptions) Complete(f kit.Factory, _ *cobra.Command, args []string) (err error) {
	if len(args) > 0 {
		return fmt.Errorf("check compat takes no arguments (got %q): name the pool with --pool", strings.Join(args, " "))
	}
	if o.Pool != "" || o.Compat.ConfigMap != "" {
		o.clients, err = f.Clients()
	}
	return err
}

// Validate checks the flags.
func (o *CheckCompatOptions) Validate() error {
	if err := o.Compat.Validate(); err != nil {
		return err
	}
	if err := o.Output.Validate(); err != nil {
		return err
	}
	if o.Pool == "" && o.Chain == (compat.Chain{}) {
		return fmt.Errorf("nothing to check: give --pool POOL, or versions (--hardware, --driver, --firmware, --cann, --torch-npu, --pytorch, --cuda, --image)")
	}
	return nil
}

// Run checks and prints.
func (o *CheckCompatOptions) Run(ctx context.Context) error {
	kube := compatKube(o.clients)
	m, err := o.Compat.Load(ctx, kube)
	if err != nil {
		return err
	}
	var checks []kit.CompatCheck
	if o.Pool != "" {
		chains, err := poolChains(ctx, o.clients, o.Pool)
		if err != nil {
			return err
		}
		for _, pc := range chains {
			chain := overlayChain(pc.Chain, o.Chain)
			checks = append(checks, kit.CompatCheck{Subject: "pool " + o.Pool, Nodes: pc.Nodes, Result: compat.Check(m, chain)})
		}
	} else {
		checks = append(checks, kit.CompatCheck{Subject: "versions given", Result: compat.Check(m, o.Chain)})
	}
	if err := o.print(checks); err != nil {
		return err
	}
	for _, c := range checks {
		if err := c.Result.Err(); err != nil {
			return fmt.Errorf("%s: %w", c.Subject, err)
		}
	}
	return nil
}

// print writes the checks as data (-o json, yaml, jsonpath, ...) or as tables.
func (o *CheckCompatOptions) print(checks []kit.CompatCheck) error {
	if o.Output.Data() {
		return o.Output.Print(o.Out, checks)
	}
	return kit.PrintCompatChecks(o.Out, checks, o.Output.Format == "wide", o.Compat.Describe())
}

func compatKube(c *kit.Clients) kubernetes.Interface {
	if c == nil {
		return nil
	}
	return c.Kube
}

// poolChain is the chain of a group of a pool's nodes.
type poolChain struct {
	Chain compat.Chain
	Nodes []string
}

// poolChains reads a pool's chains: one per distinct (model, driver) among its nodes,
// each completed with the pool's declared software. A pool without nodes gives its
// declared chain alone.
func poolChains(ctx context.Context, c *kit.Clients, name string) ([]poolChain, error) {
	declared, accel, err := poolDeclared(ctx, c, name)
	if err != nil {
		return nil, err
	}
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{policy.LabelPool: name}.String()})
	if err != nil {
		return nil, err
	}
	if len(nodes.Items) == 0 && declared == (v1alpha1.SoftwareSpec{}) && accel == "" {
		return nil, fmt.Errorf("pool %q has no nodes and no Pool object: nothing to check", name)
	}
	groups := map[[2]string][]string{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		hw := accel
		if hw == "" {
			hw = policy.GPUType(n)
		}
		key := [2]string{hw, policy.DriverVersion(n)}
		groups[key] = append(groups[key], n.Name)
	}
	if len(groups) == 0 {
		groups[[2]string{accel, ""}] = nil
	}
	var out []poolChain
	for key, members := range groups {
		chain := compat.Chain{Hardware: key[0], SoftwareSpec: declared}
		if key[1] != "" {
			chain.Driver = key[1]
		}
		sort.Strings(members)
		out = append(out, poolChain{Chain: chain, Nodes: members})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Chain.Hardware != out[j].Chain.Hardware {
			return out[i].Chain.Hardware < out[j].Chain.Hardware
		}
		return out[i].Chain.Driver < out[j].Chain.Driver
	})
	return out, nil
}

// poolDeclared is a pool's spec.software and accelerator type; zero for a pool that
// exists only as node labels.
func poolDeclared(ctx context.Context, c *kit.Clients, name string) (v1alpha1.SoftwareSpec, string, error) {
	p, err := c.Pools.Get(ctx, name)
	if apierrors.IsNotFound(err) {
		return v1alpha1.SoftwareSpec{}, "", nil
	}
	if err != nil {
		return v1alpha1.SoftwareSpec{}, "", err
	}
	return p.Spec.Software, p.Spec.Accelerator.Type, nil
}

// overlayChain replaces base's values with the ones given.
func overlayChain(base, given compat.Chain) compat.Chain {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&base.Hardware, given.Hardware)
	set(&base.Driver, given.Driver)
	set(&base.Firmware, given.Firmware)
	set(&base.CANN, given.CANN)
	set(&base.TorchNPU, given.TorchNPU)
	set(&base.PyTorch, given.PyTorch)
	set(&base.CUDA, given.CUDA)
	set(&base.Image, given.Image)
	return base
}
