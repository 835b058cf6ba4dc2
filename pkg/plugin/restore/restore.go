// Package restore is `kubectl litepool restore`: it puts back the Pools, DriverRollouts
// and StressRuns saved with `kubectl get pools,driverrollouts,stressruns -o yaml`, onto
// a fresh install (docs/backup.md).
//
// kubectl alone cannot do it safely: `kubectl create` refuses the saved uid and
// resourceVersion, and neither create nor apply writes status. A DriverRollout or
// StressRun without its status is one that has not started, so litepool's controller
// would run it again: drain and reinstall drivers, run stress tests. restore writes each
// one's status right after creating it, and refuses while a controller runs.
package restore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// kinds are what restore takes, in the order it creates them: a DriverRollout or a
// StressRun names its Pool, which the webhook checks.
var kinds = []kindOf{
	{"Pool", v1alpha1.PoolResource, false},
	{"DriverRollout", v1alpha1.DriverRolloutResource, true},
	{"StressRun", v1alpha1.StressRunResource, true},
}

type kindOf struct {
	kind          string
	resource      schema.GroupVersionResource
	restoreStatus bool // a Pool's status is the controller's to recompute
}

// Options is `restore`.
type Options struct {
	Filename            string
	ControllerNamespace string

	objects []*unstructured.Unstructured
	dyn     dynamic.Interface
	kube    kubernetes.Interface
	f       kit.Factory
	genericiooptions.IOStreams
}

// NewCmdRestore is `kubectl litepool restore -f FILE`.
func NewCmdRestore(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "restore -f FILE",
		Short: "Put back Pools, DriverRollouts and StressRuns saved with kubectl get -o yaml",
		Long: templates.LongDesc(`
			Put back the Pools, DriverRollouts and StressRuns saved with
			'kubectl get pools,driverrollouts,stressruns -o yaml', onto a fresh install:
			Pools first, then rollouts and stress runs, each created without the saved
			uid and resourceVersion. A DriverRollout's and a StressRun's status (its
			phase, its nodes, its history) is written back right after it is created,
			so that a finished rollout or run stays finished: without it the controller
			would start it again. A Pool's status is not restored; the controller
			recomputes it, and the health loop's memory (status.nodeHealth) is lost.

			litepool's controller must be stopped while restore runs (scale Deployment
			litepool-controller to 0, then back). Objects that exist already are left
			as they are, so an interrupted restore is finished by running it again.`),
		Example: templates.Examples(`
			# Saved with: kubectl get pools,driverrollouts,stressruns -o yaml > litepool-backup.yaml
			# With the controller stopped (kubectl -n litepool-system scale deployment/litepool-controller --replicas=0)
			kubectl litepool restore -f litepool-backup.yaml

			# litepool installed into gpu-ops
			kubectl litepool restore -f litepool-backup.yaml --controller-namespace=gpu-ops`),
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&o.Filename, "filename", "f", "", "the saved objects: the output of kubectl get pools,driverrollouts,stressruns -o yaml (- reads stdin)")
	kit.AddControllerNamespaceFlag(cmd.Flags(), &o.ControllerNamespace)
	return kit.Bind(cmd, f, o)
}

// Complete reads and parses the file and builds the clients.
func (o *Options) Complete(f kit.Factory, _ *cobra.Command, _ []string) error {
	if o.Filename == "" {
		return errors.New("-f FILE is required: the output of kubectl get pools,driverrollouts,stressruns -o yaml")
	}
	raw, err := o.read()
	if err != nil {
		return err
	}
	if o.objects, err = Parse(raw); err != nil {
		return fmt.Errorf("%s: %w", o.Filename, err)
	}
	clients, err := f.Clients()
	if err != nil {
		return err
	}
	o.kube, o.f = clients.Kube, f
	o.dyn, err = f.DynamicClient()
	return err
}

func (o *Options) read() ([]byte, error) {
	if o.Filename == "-" {
		return io.ReadAll(o.In)
	}
	return os.ReadFile(o.Filename)
}

// Validate refuses an empty file.
func (o *Options) Validate() error {
	if len(o.objects) == 0 {
		return fmt.Errorf("%s holds no Pool, DriverRollout or StressRun: nothing to restore", o.Filename)
	}
	return nil
}

// Run checks that no controller runs, then creates each object and restores its status.
func (o *Options) Run(ctx context.Context) error {
	if gone, _ := kit.ControllerGone(ctx, o.kube, o.ControllerNamespace, o.f.Clock().Now()); !gone {
		return fmt.Errorf("litepool's controller is running, or you may not read its Lease %s/%s (restore is an administrator's: it also writes status): a DriverRollout or StressRun the controller saw before its status is restored would start again; stop it first (kubectl -n %s scale deployment/litepool-controller --replicas=0, then wait for the Lease to lapse), and start it again after the restore",
			o.ControllerNamespace, kit.ControllerLease, o.ControllerNamespace)
	}
	for _, k := range kinds {
		for _, obj := range o.objects {
			if obj.GetKind() != k.kind {
				continue
			}
			if err := o.restore(ctx, k.resource, k.restoreStatus, obj); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(o.Out, "Restored. Start litepool's controller again: kubectl -n %s scale deployment/litepool-controller --replicas=2\n", o.ControllerNamespace)
	return nil
}

// restore creates one object, and writes its saved status when withStatus.
func (o *Options) restore(ctx context.Context, res schema.GroupVersionResource, withStatus bool, saved *unstructured.Unstructured) error {
	client := o.dyn.Resource(res)
	what := fmt.Sprintf("%s/%s", res.Resource, saved.GetName())
	created, err := client.Create(ctx, Clean(saved), metav1.CreateOptions{FieldManager: "kubectl-litepool"})
	switch {
	case apierrors.IsAlreadyExists(err):
		fmt.Fprintf(o.Out, "%s exists: left as it is\n", what)
		return nil
	case err != nil:
		return fmt.Errorf("creating %s: %w (restored so far: the objects above)", what, err)
	}
	status, ok := saved.Object["status"].(map[string]any)
	switch {
	case !withStatus:
		fmt.Fprintf(o.Out, "%s created (status: the controller recomputes it%s)\n", what, lostHealth(saved))
		return nil
	case !ok || len(status) == 0:
		fmt.Fprintf(o.Out, "%s created (saved without status: the controller will start it)\n", what)
		return nil
	}
	status = Status(status, created.GetGeneration())
	created.Object["status"] = status
	if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "kubectl-litepool"}); err != nil {
		return fmt.Errorf("%s created, but its status was not restored: %w; delete it (kubectl delete %s) before starting the controller, or it runs again",
			what, err, what)
	}
	fmt.Fprintf(o.Out, "%s created, status restored (phase %v)\n", what, status["phase"])
	return nil
}

func lostHealth(pool *unstructured.Unstructured) string {
	entries, _, _ := unstructured.NestedSlice(pool.Object, "status", "nodeHealth")
	if len(entries) == 0 {
		return ""
	}
	return fmt.Sprintf("; the health loop's memory of %d node(s), status.nodeHealth, is lost", len(entries))
}

// Parse reads the saved objects: a List (kubectl get -o yaml) or several documents, in
// YAML or JSON. Anything but a Pool, DriverRollout or StressRun of runwhere.ai/v1alpha1
// is refused, by position and name.
func Parse(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(bytes.NewReader(raw)), 4096)
	var out []*unstructured.Unstructured
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(doc) == "null" {
			continue
		}
		// The unstructured scheme keeps whole numbers int64, as the API server sends them.
		obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, doc)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", len(out)+1, err)
		}
		items := []*unstructured.Unstructured{}
		switch o := obj.(type) {
		case *unstructured.UnstructuredList:
			for i := range o.Items {
				items = append(items, &o.Items[i])
			}
		case *unstructured.Unstructured:
			items = append(items, o)
		}
		for _, u := range items {
			if err := accept(u, len(out)+1); err != nil {
				return nil, err
			}
			out = append(out, u)
		}
	}
}

func accept(u *unstructured.Unstructured, n int) error {
	known := slices.ContainsFunc(kinds, func(k kindOf) bool { return k.kind == u.GetKind() })
	if !known || u.GetAPIVersion() != v1alpha1.GroupVersion.String() {
		return fmt.Errorf("object %d is %s %s %q: restore takes only Pools, DriverRollouts and StressRuns of %s (the output of kubectl get pools,driverrollouts,stressruns -o yaml)",
			n, u.GetAPIVersion(), u.GetKind(), u.GetName(), v1alpha1.GroupVersion)
	}
	if u.GetName() == "" {
		return fmt.Errorf("object %d, a %s, has no name", n, u.GetKind())
	}
	return nil
}

// Clean is saved as a new object: its name, labels, annotations and spec. The uid,
// resourceVersion, generation, timestamps and managed fields were the old cluster's;
// ownerReferences and finalizers name objects of the old cluster (and the controller
// adds its finalizers again); status is written separately.
func Clean(saved *unstructured.Unstructured) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(saved.GetAPIVersion())
	u.SetKind(saved.GetKind())
	u.SetName(saved.GetName())
	u.SetLabels(saved.GetLabels())
	u.SetAnnotations(saved.GetAnnotations())
	if spec, ok := saved.Object["spec"]; ok {
		u.Object["spec"] = spec
	}
	return u
}

// Status is the saved status as the new object's: its observedGeneration is the new
// object's generation (the saved one counted the old object's spec changes).
func Status(saved map[string]any, generation int64) map[string]any {
	out := make(map[string]any, len(saved))
	for k, v := range saved {
		out[k] = v
	}
	if _, ok := out["observedGeneration"]; ok {
		out["observedGeneration"] = generation
	}
	return out
}
