package get

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// GetQuotaOptions is `get quota`.
type GetQuotaOptions struct {
	Print     *kit.PrintOptions
	Names     []string // gpuctl quota names; empty: all
	Namespace string   // empty: every namespace

	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdGetQuota is `kubectl litepool get quota [NAME...]`.
func NewCmdGetQuota(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &GetQuotaOptions{Print: kit.NewPrintOptions(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:     "quota [NAME...]",
		Aliases: []string{"quotas"},
		Short:   "Show gpuctl quotas: use against the limits, per namespace",
		Long: templates.LongDesc(`
			Show the ResourceQuotas made from gpuctl quota files (label
			runwhere.ai/quota), one row per namespace: what the namespace's pods
			request against each limit (used/hard) of CPU, memory and accelerators. The
			figures are the API server's (status.used). NAME narrows to those quotas;
			-n to one namespace (every namespace otherwise).`),
		Example: templates.Examples(`
			# Every gpuctl quota
			kubectl litepool get quota

			# One quota, one namespace, as YAML
			kubectl litepool get quota team-quota -n team-a -o yaml`),
	}
	o.Print.AddFlags(cmd)
	return kit.Bind(cmd, f, o)
}

// Complete reads the names and -n (every namespace without it), and builds the
// clients.
func (o *GetQuotaOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	o.Names = args
	if cmd.Flags().Changed("namespace") {
		if o.Namespace, _, err = f.ToRawKubeConfigLoader().Namespace(); err != nil {
			return err
		}
	}
	o.clients, err = f.Clients()
	return err
}

// Validate checks -o.
func (o *GetQuotaOptions) Validate() error { return o.Print.Validate() }

// Run lists the quotas and prints them.
func (o *GetQuotaOptions) Run(ctx context.Context) error {
	req, err := labels.NewRequirement(policy.LabelQuota, selection.Exists, nil)
	if err != nil {
		return err
	}
	sel := labels.NewSelector().Add(*req)
	if len(o.Names) > 0 {
		in, err := labels.NewRequirement(policy.LabelQuota, selection.In, o.Names)
		if err != nil {
			return err
		}
		sel = sel.Add(*in)
	}
	list, err := o.clients.Kube.CoreV1().ResourceQuotas(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return err
	}
	items := list.Items
	slices.SortFunc(items, func(a, b corev1.ResourceQuota) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for i := range items {
		items[i].APIVersion, items[i].Kind = "v1", "ResourceQuota"
	}
	if len(items) == 0 && o.Print.IsTable() {
		where := "any namespace"
		if o.Namespace != "" {
			where = "namespace " + o.Namespace
		}
		_, err := o.ErrOut.Write([]byte("No gpuctl quotas found in " + where + ".\n"))
		return err
	}
	for _, w := range quotaWarnings(items) {
		if _, err := io.WriteString(o.ErrOut, w); err != nil {
			return err
		}
	}
	return kit.Print(o.Print, o.Out, items, false, QuotaTable(o.clients.Accelerators))
}

// QuotaTable is the table of `get quota`: used/hard per limit; -o wide names the
// accelerator resource (of the set accel) the GPU column counts.
func QuotaTable(accel policy.Accelerators) func([]corev1.ResourceQuota) *metav1.Table {
	return func(quotas []corev1.ResourceQuota) *metav1.Table { return quotaTable(quotas, accel) }
}

func quotaTable(quotas []corev1.ResourceQuota, accel policy.Accelerators) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		kit.Column("Namespace", "string", false),
		kit.Column("Quota", "string", false),
		kit.Column("CPU", "string", false),
		kit.Column("Memory", "string", false),
		kit.Column("GPU", "string", false),
		kit.Column("Name", "string", true),
		kit.Column("GPU Resource", "string", true),
	}}
	for i := range quotas {
		q := &quotas[i]
		gpu := quotaAccelerator(q, accel)
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{q.Namespace, q.Labels[policy.LabelQuota],
				quotaCell(q, corev1.ResourceCPU), quotaCell(q, corev1.ResourceMemory), quotaCell(q, gpu),
				q.Name, kit.None(string(gpu))},
			Object: runtime.RawExtension{Object: q},
		})
	}
	return t
}

// quotaAccelerator is the accelerator resource (of accel) a quota limits, under any of
// its keys (requests.<r>, <r>, limits.<r>), or "".
func quotaAccelerator(q *corev1.ResourceQuota, accel policy.Accelerators) corev1.ResourceName {
	for _, rn := range slices.Sorted(maps.Keys(q.Spec.Hard)) {
		if name := resourceOfQuotaKey(rn); accel.Is(name) {
			return name
		}
	}
	return ""
}

// resourceOfQuotaKey is the resource a quota key limits: requests.cpu, cpu and
// limits.cpu all limit cpu.
func resourceOfQuotaKey(key corev1.ResourceName) corev1.ResourceName {
	name := strings.TrimPrefix(string(key), corev1.DefaultResourceRequestsPrefix)
	return corev1.ResourceName(strings.TrimPrefix(name, "limits."))
}

// quotaCell writes what a quota limits of one resource, as used/hard the way the API
// server reports them (status.used): its requests (requests.<r>, or the bare <r> that
// gpuctl writes, when requests.<r> is not set) and, when set, its limits
// ("2500m/16, limits 4/32"); "-" when the quota limits the resource under no key.
func quotaCell(q *corev1.ResourceQuota, rn corev1.ResourceName) string {
	if rn == "" {
		return "-"
	}
	var parts []string
	for _, key := range []corev1.ResourceName{corev1.DefaultResourceRequestsPrefix + rn, rn} {
		if s, ok := usedOfHard(q, key); ok {
			parts = append(parts, s)
			break
		}
	}
	if s, ok := usedOfHard(q, "limits."+rn); ok {
		parts = append(parts, "limits "+s)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// usedOfHard writes one limit as used/hard ("4/16"); false when the quota sets none.
func usedOfHard(q *corev1.ResourceQuota, key corev1.ResourceName) (string, bool) {
	hard, ok := q.Spec.Hard[key]
	if !ok {
		return "", false
	}
	used := q.Status.Used[key] // none yet: the zero quantity, 0
	return used.String() + "/" + hard.String(), true
}

// quotaWarnings are kubectl-style warnings for the keys of the quotas that Kubernetes
// accepts but does not enforce (policy.UnenforcedQuotaKey), each naming the key that
// would be enforced.
func quotaWarnings(quotas []corev1.ResourceQuota) []string {
	var out []string
	for i := range quotas {
		q := &quotas[i]
		for _, key := range slices.Sorted(maps.Keys(q.Spec.Hard)) {
			enforced, bad := policy.UnenforcedQuotaKey(key)
			if !bad {
				continue
			}
			hard := q.Spec.Hard[key]
			out = append(out, fmt.Sprintf("Warning: resourcequota %s/%s: %s is not enforced by Kubernetes, which limits an extended resource only by its requests, so pods may use more than %s; set %s instead\n",
				q.Namespace, q.Name, key, hard.String(), enforced))
		}
	}
	return out
}
