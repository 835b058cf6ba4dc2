package kittest

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// seqDigits is the width of the sequence number GenerateNames appends.
const seqDigits = 6

// generateNames makes the core fake name the Events it creates from their
// generateName, as the API server does: without it every Event is named "" and only
// the first of a test is stored. The names end in a sequence number, so that Events
// lists them in the order they were recorded.
func (f *Factory) generateNames() *Factory {
	var seq atomic.Int64
	f.Kube.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if e, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Event); ok && e.Name == "" && e.GenerateName != "" {
			e.Name = fmt.Sprintf("%s%0*d", e.GenerateName, seqDigits, seq.Add(1))
		}
		return false, nil, nil
	})
	return f
}

// Events lists the Events recorded in the default namespace (where those of nodes and
// pools go) as "Reason: message", in the order they were recorded (see generateNames).
func (f *Factory) Events(t testing.TB) []string {
	t.Helper()
	list, err := f.Kube.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("kittest: events: %v", err)
	}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool { return seqOf(items[i].Name) < seqOf(items[j].Name) })
	var out []string
	for _, e := range items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func seqOf(name string) string {
	if len(name) < seqDigits {
		return name
	}
	return name[len(name)-seqDigits:]
}
