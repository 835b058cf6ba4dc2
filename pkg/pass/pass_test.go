package pass

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

type world struct {
	c       client.Client
	refuse  error
	told    []string
	stored  []string
	request reconcile.Request
}

func newWorld(t *testing.T) *world {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	w := &world{request: reconcile.Request{NamespacedName: client.ObjectKey{Name: "r"}}}
	w.c = fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.StressRun{}).
		WithObjects(&v1alpha1.StressRun{ObjectMeta: metav1.ObjectMeta{Name: "r"}}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if w.refuse != nil {
				err := w.refuse
				w.refuse = nil
				return err
			}
			w.stored = append(w.stored, string(obj.(*v1alpha1.StressRun).Status.Phase))
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	return w
}

// pass decides phase, says so in an effect, and marks it paid by the Running phase.
func (w *world) pass(phase v1alpha1.StressRunPhase, stepErr error) *Pass[*v1alpha1.StressRun] {
	return &Pass[*v1alpha1.StressRun]{Client: w.c, New: func() *v1alpha1.StressRun { return &v1alpha1.StressRun{} },
		Decide: func(_ context.Context, run *v1alpha1.StressRun) (Decision, error) {
			if run.Status.Phase == phase {
				return Decision{}, nil
			}
			run.Status.Phase = phase
			return Decision{Err: stepErr, Effects: []Effect{func(context.Context) error {
				w.told = append(w.told, string(phase))
				return nil
			}}, Paid: func() { run.Status.Namespace = "told " + string(phase) }}, nil
		}}
}

// The order is load, decide, store, tell, store the paid mark: a refused write tells
// nobody; an error of a step still stores and tells what was decided.
func TestStoreThenTell(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.refuse = apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("stressruns").GroupResource(), "r", errors.New("stale"))
	_, err := w.pass(v1alpha1.StressRunRunning, nil).Reconcile(ctx, w.request)
	assert.True(t, apierrors.IsConflict(err))
	assert.Empty(t, w.told)

	_, err = w.pass(v1alpha1.StressRunRunning, nil).Reconcile(ctx, w.request)
	require.NoError(t, err)
	assert.Equal(t, []string{"Running"}, w.told)
	assert.Equal(t, []string{"Running", "Running"}, w.stored, "the decision, then the paid mark")
	var run v1alpha1.StressRun
	require.NoError(t, w.c.Get(ctx, w.request.NamespacedName, &run))
	assert.Equal(t, "told Running", run.Status.Namespace)

	_, err = w.pass(v1alpha1.StressRunRunning, nil).Reconcile(ctx, w.request)
	require.NoError(t, err)
	assert.Equal(t, []string{"Running"}, w.told, "nothing new decided, nothing told")

	_, err = w.pass(v1alpha1.StressRunFailed, assert.AnError).Reconcile(ctx, w.request)
	assert.ErrorIs(t, err, assert.AnError)
	assert.Equal(t, []string{"Running", "Failed"}, w.told, "a step's error still tells what was stored")
	require.NoError(t, w.c.Get(ctx, w.request.NamespacedName, &run))
	assert.Equal(t, v1alpha1.StressRunFailed, run.Status.Phase)
	assert.Equal(t, []string{"Running", "Running", "Failed", "Failed"}, w.stored, "and its paid mark")
}
