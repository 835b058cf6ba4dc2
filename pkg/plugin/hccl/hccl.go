// Package hccl is `kubectl litepool hccl set|get`.
package hccl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/retry"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// NewCmdHCCL is `kubectl litepool hccl`.
func NewCmdHCCL(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hccl",
		Short: "Set or show a pool's HCCL operator-retry settings",
		Long: templates.LongDesc(`
			HCCL operator retry lets Ascend collective operations retry after a link
			fault instead of failing the job. The settings live in the pool's
			spec.hccl.opRetry; the admission webhook injects HCCL_OP_RETRY_ENABLE and
			HCCL_OP_RETRY_PARAMS into the NPU pods of the pool (rule P1).`),
		Example: templates.Examples(`
			# Turn operator retry on
			kubectl litepool hccl set train-snt9b --op-retry=true --max-retries 3 --retry-timeout 300s

			# Show a pool's settings and the environment its NPU pods get
			kubectl litepool hccl get train-snt9b`),
	}
	cmd.AddCommand(NewCmdHCCLSet(f, streams), NewCmdHCCLGet(f, streams))
	return cmd
}

// HCCLSetOptions is `hccl set`.
type HCCLSetOptions struct {
	kit.Mutation
	Pool         string
	OpRetry      bool
	MaxRetries   int32
	RetryTimeout time.Duration

	changed map[string]bool
	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewHCCLSetOptions returns the options of hccl set.
func NewHCCLSetOptions(streams genericiooptions.IOStreams) *HCCLSetOptions {
	return &HCCLSetOptions{Mutation: kit.NewMutation(), IOStreams: streams}
}

// NewCmdHCCLSet is `kubectl litepool hccl set`.
func NewCmdHCCLSet(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewHCCLSetOptions(streams)
	cmd := &cobra.Command{
		Use:   "set POOL [--op-retry=true|false] [--max-retries N] [--retry-timeout DURATION]",
		Short: "Set a pool's HCCL operator retry (stored in spec.hccl.opRetry)",
		Long: templates.LongDesc(`
			Set HCCL operator retry for a pool's NPU pods. Only the flags given
			change; the others keep their values. --max-retries is 1-10 (HCCL's
			MaxCnt); --retry-timeout is a whole number of seconds, 1s-3600s. Values out
			of range are refused and nothing changes. New NPU pods of the pool get the
			environment from the webhook; running pods keep theirs until restarted.`),
		Example: templates.Examples(`
			# Retry up to 3 times within 300 seconds
			kubectl litepool hccl set train-snt9b --op-retry=true --max-retries 3 --retry-timeout 300s

			# Turn it off, keeping the numbers
			kubectl litepool hccl set train-snt9b --op-retry=false

			# Check the change with the API server, without storing it
			kubectl litepool hccl set train-snt9b --max-retries 5 --dry-run=server`),
		ValidArgsFunction: kit.CompletePoolNames(f),
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.OpRetry, "op-retry", false, "Turn HCCL operator retry on or off")
	fl.Int32Var(&o.MaxRetries, "max-retries", policy.HCCLDefaultRetries, fmt.Sprintf("Retries per operator, %d-%d", policy.HCCLMinRetries, policy.HCCLMaxRetries))
	fl.DurationVar(&o.RetryTimeout, "retry-timeout", policy.HCCLDefaultTimeout*time.Second, fmt.Sprintf("Time the retries may take, %ds-%ds", policy.HCCLMinTimeoutSeconds, policy.HCCLMaxTimeoutSeconds))
	o.Mutation.AddFlags(cmd, false)
	return kit.Bind(cmd, f, o)
}

// Complete reads the pool name and which flags were given, and builds the clients.
func (o *HCCLSetOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if len(args) != 1 {
		return fmt.Errorf("give exactly one pool: kubectl litepool hccl set POOL [flags]")
	}
	o.Pool = args[0]
	o.changed = map[string]bool{}
	for _, n := range []string{"op-retry", "max-retries", "retry-timeout"} {
		o.changed[n] = cmd.Flags().Changed(n)
	}
	o.clients, err = o.CompleteClients(f, cmd)
	return err
}

// Validate checks the values with the pool rule R1, and -o.
func (o *HCCLSetOptions) Validate() error {
	if err := o.Mutation.Validate(); err != nil {
		return err
	}
	if !o.changed["op-retry"] && !o.changed["max-retries"] && !o.changed["retry-timeout"] {
		return fmt.Errorf("nothing to set: give --op-retry, --max-retries or --retry-timeout")
	}
	if o.RetryTimeout%time.Second != 0 {
		return policy.Violationf("R1", "hccl retry timeout %s: must be a whole number of seconds", o.RetryTimeout)
	}
	// 0 means "unset" inside a Pool, and ValidateHCCL passes it; typed on the command
	// line it is a value, and out of range.
	if o.changed["max-retries"] && o.MaxRetries == 0 {
		return policy.Violationf("R1", "hccl max retries 0 out of range: must be %d-%d", policy.HCCLMinRetries, policy.HCCLMaxRetries)
	}
	if o.changed["retry-timeout"] && o.RetryTimeout == 0 {
		return policy.Violationf("R1", "hccl retry timeout 0s out of range: must be %d-%ds", policy.HCCLMinTimeoutSeconds, policy.HCCLMaxTimeoutSeconds)
	}
	secs := int64(o.RetryTimeout / time.Second)
	if secs > policy.HCCLMaxTimeoutSeconds { // before it could overflow int32
		return policy.Violationf("R1", "hccl retry timeout %ds out of range: must be %d-%ds", secs, policy.HCCLMinTimeoutSeconds, policy.HCCLMaxTimeoutSeconds)
	}
	return policy.ValidateHCCL(v1alpha1.OpRetrySpec{MaxRetries: o.MaxRetries, RetryTimeoutSeconds: int32(secs)})
}

// Run writes the settings into the pool (the fields given; the others as they were),
// rereading the pool if someone else changed it meanwhile.
func (o *HCCLSetOptions) Run(ctx context.Context) error {
	var written *v1alpha1.Pool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pool, err := o.clients.Pools.Get(ctx, o.Pool)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("pool %q has no Pool object: HCCL settings live in spec.hccl; create the pool first (kubectl litepool create)", o.Pool)
		}
		if err != nil {
			return err
		}
		r := o.merge(pool.Spec.HCCL.OpRetry)
		if err := policy.ValidateHCCL(r); err != nil {
			return err
		}
		pool.Spec.HCCL.OpRetry = r
		if written = pool; o.DryRun == cmdutil.DryRunClient {
			return nil
		}
		written, err = o.clients.Pools.Update(ctx, pool, metav1.UpdateOptions{DryRun: o.ServerDryRun()})
		return err
	})
	if err != nil {
		return err
	}
	r := written.Spec.HCCL.OpRetry
	ref := events.Ref{Kind: "Pool", APIVersion: v1alpha1.GroupVersion.String(), Name: written.Name, UID: string(written.UID)}
	o.Event(ctx, &ref, false, "HCCLOpRetry", "HCCL operator retry %s", hcclSummary(r))
	if o.Output() == "" {
		// Not o.Print: this line has always named the pool pool/NAME.
		fmt.Fprintf(o.Out, "pool/%s hccl operator retry: %s%s\n", o.Pool, hcclSummary(r), o.Suffix())
		return nil
	}
	return o.Print(o.Out, written, "")
}

// merge is r with the flags given; unset numbers take HCCL's defaults.
func (o *HCCLSetOptions) merge(r v1alpha1.OpRetrySpec) v1alpha1.OpRetrySpec {
	if o.changed["op-retry"] {
		r.Enabled = o.OpRetry
	}
	if o.changed["max-retries"] {
		r.MaxRetries = o.MaxRetries
	}
	if o.changed["retry-timeout"] {
		r.RetryTimeoutSeconds = int32(o.RetryTimeout / time.Second)
	}
	if r.MaxRetries == 0 {
		r.MaxRetries = policy.HCCLDefaultRetries
	}
	if r.RetryTimeoutSeconds == 0 {
		r.RetryTimeoutSeconds = policy.HCCLDefaultTimeout
	}
	return r
}

func hcclSummary(r v1alpha1.OpRetrySpec) string {
	state := "off"
	if r.Enabled {
		state = "on"
	}
	return fmt.Sprintf("%s, max retries %d, retry timeout %ds", state, r.MaxRetries, r.RetryTimeoutSeconds)
}

// HCCLGetOptions is `hccl get`.
type HCCLGetOptions struct {
	Pools   []string
	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdHCCLGet is `kubectl litepool hccl get`.
func NewCmdHCCLGet(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &HCCLGetOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "get [POOL...]",
		Short: "Show pools' HCCL operator-retry settings and the environment their NPU pods get",
		Long: templates.LongDesc(`
			Show the HCCL operator-retry settings stored in pools' spec.hccl.opRetry
			and the environment the webhook injects into their NPU pods from them.
			Without names, every Pool object is shown.`),
		Example: templates.Examples(`
			# One pool
			kubectl litepool hccl get train-snt9b

			# Every pool
			kubectl litepool hccl get`),
		ValidArgsFunction: kit.CompletePoolNames(f),
	}
	return kit.Bind(cmd, f, o)
}

// Complete reads the pool names and builds the clients.
func (o *HCCLGetOptions) Complete(f kit.Factory, _ *cobra.Command, args []string) (err error) {
	o.Pools = args
	o.clients, err = f.Clients()
	return err
}

// Validate has nothing to check: no names means every pool.
func (o *HCCLGetOptions) Validate() error { return nil }

// Run prints the settings.
func (o *HCCLGetOptions) Run(ctx context.Context) error {
	var pools []v1alpha1.Pool
	if len(o.Pools) == 0 {
		all, err := o.clients.Pools.List(ctx)
		if err != nil {
			return err
		}
		pools = all
	}
	for _, name := range o.Pools {
		p, err := o.clients.Pools.Get(ctx, name)
		if err != nil {
			return err
		}
		pools = append(pools, *p)
	}
	w := printers.GetNewTabWriter(o.Out)
	fmt.Fprintln(w, "POOL\tOP RETRY\tMAX RETRIES\tRETRY TIMEOUT\tNPU POD ENV")
	for _, p := range pools {
		r := p.Spec.HCCL.OpRetry
		var env []string
		for _, e := range policy.HCCLEnv(p.Spec) {
			env = append(env, e.Name+"="+e.Value)
		}
		retries, timeout := "-", "-"
		if r.Enabled || r.MaxRetries != 0 {
			retries = fmt.Sprint(max(r.MaxRetries, 0))
		}
		if r.Enabled || r.RetryTimeoutSeconds != 0 {
			timeout = fmt.Sprintf("%ds", r.RetryTimeoutSeconds)
		}
		fmt.Fprintf(w, "%s\t%t\t%s\t%s\t%s\n", p.Name, r.Enabled, retries, timeout, kit.None(strings.Join(env, " ")))
	}
	return w.Flush()
}
