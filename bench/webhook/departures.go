package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
)

const floorPool = "bench-floor"

// benchDepartures measures what the minNodes reservation costs one node removal (a
// merge patch that removes the pool label, through kube-apiserver), beside the same
// removal with no webhook and a label change the webhook judges from its cache alone,
// all in this run: latency, and the API calls the webhook makes per removal.
func benchDepartures(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, c config, addr string, caPEM []byte) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: webhookNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := poolclient.New(dyn).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: floorPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cases := []struct {
		name     string
		webhook  bool
		conc     int
		departed bool // the case removes the pool label (else it sets runwhere.ai/health)
	}{
		{"no webhook: remove pool label", false, 1, true},
		{"webhook: N1 label change (cache only)", true, 1, false},
		{"webhook: departure, reserved", true, 1, true},
		{"webhook: departures, 8 at a time", true, 8, true},
	}
	for i := range cases {
		if err := makeFloorNodes(ctx, kube, i, c.departures); err != nil {
			return err
		}
	}
	fmt.Printf("\nnode removals through kube-apiserver (merge patch removing %s from a member of pool %s, minNodes 1, %d members), %d per case\n",
		policy.LabelPool, floorPool, len(cases)*c.departures, c.departures)
	fmt.Printf("%-40s %10s %10s %10s %14s\n", "case", "changes/s", "p50 ms", "p99 ms", "API calls each")
	unregister := func() {}
	for i, cs := range cases {
		if cs.webhook && i > 0 && !cases[i-1].webhook {
			if unregister, err = register(ctx, kube, c.root, addr, caPEM); err != nil {
				return err
			}
		}
		patch := `{"metadata":{"labels":{"` + policy.LabelPool + `":null}}}`
		if !cs.departed {
			patch = `{"metadata":{"labels":{"` + policy.LabelHealth + `":"healthy"}}}`
		}
		calls0 := departureCalls()
		res, err := load(cs.conc, c.departures, 2*time.Minute, func(j int) error {
			_, err := kube.CoreV1().Nodes().Patch(ctx, floorNode(i, j), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		})
		if err != nil {
			unregister()
			return fmt.Errorf("%s: %w", cs.name, err)
		}
		calls := "-"
		if cs.webhook {
			calls = fmt.Sprintf("%.2f", float64(departureCalls()-calls0)/float64(c.departures))
		}
		fmt.Printf("%-40s %10.0f %10.3f %10.3f %14s\n", cs.name, res.rate, ms(res.p50), ms(res.p99), calls)
	}
	unregister()
	for i := range cases {
		for j := range c.departures {
			_ = kube.CoreV1().Nodes().Delete(ctx, floorNode(i, j), metav1.DeleteOptions{})
		}
	}
	return nil
}

func floorNode(c, i int) string { return fmt.Sprintf("bench-floor-%d-%03d", c, i) }

func makeFloorNodes(ctx context.Context, kube kubernetes.Interface, c, n int) error {
	for i := range n {
		_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: floorNode(c, i),
			Labels: map[string]string{policy.LabelPool: floorPool}}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

var departureCallRE = regexp.MustCompile(`(?m)^litepool_webhook_departure_api_calls_total\{[^}]*\} (\d+)`)

// departureCalls sums the webhook's reservation API calls from its /metrics.
func departureCalls() int {
	resp, err := http.Get("http://" + webhookMetrics + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	total := 0
	for _, m := range departureCallRE.FindAllStringSubmatch(string(body), -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	return total
}
