package events

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// An event carries the time of the clock the recorder was given: the command's, so
// that a test's fake clock is the time its events show.
func TestRecorderStampsWithItsClock(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123000, time.UTC)
	kube := fake.NewClientset()
	r := &Recorder{Client: kube, Clock: clocktesting.NewFakePassiveClock(at)}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}
	require.NoError(t, r.Warning(context.Background(), NodeRef(node).About(PoolRef("p")), "Left", "node %s left", "n1"))

	list, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	e := list.Items[0]
	assert.Equal(t, at, e.EventTime.UTC())
	assert.Equal(t, at.Truncate(time.Second), e.FirstTimestamp.UTC().Truncate(time.Second))
	assert.Equal(t, "node n1 left", e.Message)
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, "u1", string(e.InvolvedObject.UID))
	require.NotNil(t, e.Related)
	assert.Equal(t, "p", e.Related.Name)
}

// Under dry run, or without a client, nothing is recorded.
func TestRecorderDryRunRecordsNothing(t *testing.T) {
	kube := fake.NewClientset()
	r := &Recorder{Client: kube, DryRun: true}
	require.NoError(t, r.Normal(context.Background(), PoolRef("p"), "X", "y"))
	list, err := kube.CoreV1().Events(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list.Items)
	var none *Recorder
	assert.NoError(t, none.Normal(context.Background(), PoolRef("p"), "X", "y"))
}
