package get

import (
	"context"
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
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Names = args
			if cmd.Flags().Changed("namespace") {
				ns, _, err := f.ToRawKubeConfigLoader().Namespace()
				if err != nil {
					return err
				}
				o.Namespace = ns
			}
			if err := o.Print.Validate(); err != nil {
				return err
			}
			c, err := f.Clients()
			if err != nil {
				return err
			}
			o.clients = c
			return o.Run(cmd.Context())
		},
	}
	o.Print.AddFlags(cmd)
	return cmd
}

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
				usedOfHard(q, corev1.ResourceRequestsCPU), usedOfHard(q, corev1.ResourceRequestsMemory), usedOfHard(q, gpu),
				q.Name, kit.None(strings.TrimPrefix(string(gpu), corev1.DefaultResourceRequestsPrefix))},
			Object: runtime.RawExtension{Object: q},
		})
	}
	return t
}

// quotaAccelerator is the requests.<accelerator> limit of a quota, or "".
func quotaAccelerator(q *corev1.ResourceQuota, accel policy.Accelerators) corev1.ResourceName {
	for _, rn := range slices.Sorted(maps.Keys(q.Spec.Hard)) {
		if name, ok := strings.CutPrefix(string(rn), corev1.DefaultResourceRequestsPrefix); ok && accel.Is(corev1.ResourceName(name)) {
			return rn
		}
	}
	return ""
}

// usedOfHard writes one limit as used/hard ("4/16"), "-" when the quota sets none.
func usedOfHard(q *corev1.ResourceQuota, rn corev1.ResourceName) string {
	hard, ok := q.Spec.Hard[rn]
	if rn == "" || !ok {
		return "-"
	}
	used := q.Status.Used[rn] // none yet: the zero quantity, 0
	return used.String() + "/" + hard.String()
}
