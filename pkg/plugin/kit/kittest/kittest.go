// Package kittest runs litepool's commands in unit tests: a kit.Factory backed by fake
// clientsets (core types and Pools) and a fake clock, and a runner that executes a
// command through cobra, as a user would, capturing stdout and stderr.
package kittest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
)

// Now is the fake clock's start: a fixed instant, so that output with times is exact.
var Now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// Namespace is the namespace of the fake kubeconfig's context.
const Namespace = "test"

// Factory is a kit.Factory over fakes. Kube and Dynamic are exposed so that a test can
// inject failures (PrependReactor) and read what a command left behind.
type Factory struct {
	*genericclioptions.TestConfigFlags
	Kube    *fake.Clientset
	Dynamic *dynamicfake.FakeDynamicClient
	Clocks  *clocktesting.FakeClock
	// Accelerators is the set the commands count with (--accelerator-resources).
	Accelerators policy.Accelerators
}

var _ kit.Factory = (*Factory)(nil)

// DynamicClient is the dynamic fake.
func (f *Factory) DynamicClient() (dynamic.Interface, error) { return f.Dynamic, nil }

// NewFactory returns a Factory holding objects: Pools go to the dynamic fake, the rest
// to the core clientset.
func NewFactory(t testing.TB, objects ...runtime.Object) *Factory {
	t.Helper()
	var core, pools []runtime.Object
	for _, o := range objects {
		p, ok := o.(*v1alpha1.Pool)
		if !ok {
			core = append(core, o)
			continue
		}
		u, err := poolclient.ToUnstructured(p)
		if err != nil {
			t.Fatalf("kittest: pool %s: %v", p.Name, err)
		}
		pools = append(pools, u)
	}
	cfg := clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{
		ClusterInfo: clientcmdapi.Cluster{Server: "https://fake.invalid"},
	})
	f := &Factory{
		TestConfigFlags: genericclioptions.NewTestConfigFlags().WithClientConfig(cfg).WithNamespace(Namespace),
		Kube:            fake.NewClientset(core...),
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), // unstructured only: a typed Pool in the scheme breaks List
			map[schema.GroupVersionResource]string{v1alpha1.PoolResource: "PoolList"}, pools...),
		Clocks: clocktesting.NewFakeClock(Now),
	}
	f.Kube.PrependReactor("*", "*", serverDryRun(f.Kube.Tracker()))
	f.Dynamic.PrependReactor("*", "*", serverDryRun(f.Dynamic.Tracker()))
	f.honourPodFieldSelectors()
	return f.generateNames()
}

// serverDryRun makes the fakes honour --dry-run=server as the API server does: a write
// with dryRun=All is answered and not stored (the fakes would store it). A patch is
// answered with the object as it is (unpatched): enough for a command that prints it.
func serverDryRun(tracker k8stesting.ObjectTracker) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		var dryRun []string
		var obj runtime.Object
		switch a := a.(type) {
		case k8stesting.CreateActionImpl:
			dryRun, obj = a.CreateOptions.DryRun, a.Object
		case k8stesting.UpdateActionImpl:
			dryRun, obj = a.UpdateOptions.DryRun, a.Object
		case k8stesting.DeleteActionImpl:
			dryRun = a.DeleteOptions.DryRun
		case k8stesting.PatchActionImpl:
			if dryRun = a.PatchOptions.DryRun; len(dryRun) > 0 {
				current, err := tracker.Get(a.GetResource(), a.GetNamespace(), a.Name)
				return true, current, err
			}
		}
		if len(dryRun) == 0 {
			return false, nil, nil
		}
		return true, obj, nil
	}
}

// Clients implements kit.Factory.
func (f *Factory) Clients() (*kit.Clients, error) {
	return &kit.Clients{Kube: f.Kube, Pools: poolclient.New(f.Dynamic), Accelerators: f.Accelerators, Dynamic: f.Dynamic}, nil
}

// Clock implements kit.Factory.
func (f *Factory) Clock() clock.PassiveClock { return f.Clocks }

// Result is what a command printed and returned.
type Result struct {
	Out, ErrOut string
	Err         error
}

// Run executes the command newCmd builds with args, through cobra (flags parsed and
// validated as for a user), with stdin, and returns what it printed.
func Run(f *Factory, newCmd func(kit.Factory, genericiooptions.IOStreams) *cobra.Command, stdin string, args ...string) Result {
	in := strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd := newCmd(f, genericiooptions.IOStreams{In: in, Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	cmd.SetIn(in)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return Result{Out: out.String(), ErrOut: errOut.String(), Err: err}
}

// Node reads a node back, failing the test if it is gone.
func (f *Factory) Node(t testing.TB, name string) *corev1.Node {
	t.Helper()
	n, err := f.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kittest: node %s: %v", name, err)
	}
	return n
}

// Pool reads a Pool back; nil when it does not exist.
func (f *Factory) Pool(t testing.TB, name string) *v1alpha1.Pool {
	t.Helper()
	p, err := poolclient.New(f.Dynamic).Get(context.Background(), name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("kittest: pool %s: %v", name, err)
	}
	return p
}

// Nodes reads the named nodes back and summarises each with describe: a compact map a
// test compares in one assertion.
func (f *Factory) Nodes(t testing.TB, describe func(*corev1.Node) string, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range names {
		out[name] = describe(f.Node(t, name))
	}
	return out
}
