package kittest

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Events are the Events a command recorded on cluster-scoped objects (they live in
// the default namespace, as the kubelet's do), as "Kind/name Reason: message".
func (f *Factory) Events(t testing.TB) []string {
	t.Helper()
	list, err := f.Kube.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("kittest: events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+" "+e.Reason+": "+e.Message)
	}
	return out
}
