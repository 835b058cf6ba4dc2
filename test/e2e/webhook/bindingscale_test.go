package webhook

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/controller"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Each setup takes 2 x bsBindingsPerRound x bsRounds bindings (a second scheduler's
// and kube-scheduler's), each of a pod made for it. 100 near-miss names per shape show
// the conditions let unlisted nodes through; the throughput this logs is a sketch, and
// bench/bindings measures it (it was 4 rounds of 100: 3,205 pods, most of this
// package's API server time).
const (
	bsNS, bsNode, bsUser = "bs-team", "bs-open-node", "bs-second-scheduler"
	bsBindingsPerRound   = 50
	bsRounds             = 2
)

// bsShapes are 10,000 exclusive node names of three shapes and the unlisted names of
// the same shape a second scheduler binds onto (near misses: they cost the regular
// expression the most). Random names share nothing: they take two conditions.
var bsShapes = map[string]func(r *rand.Rand) string{
	"numbered": func(r *rand.Rand) string { return fmt.Sprintf("gpu-node-%05d", 1+r.IntN(20000)) },
	"ec2": func(r *rand.Rand) string {
		return fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", r.IntN(4), r.IntN(256), 1+r.IntN(254))
	},
	"random12": func(r *rand.Rand) string {
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
		b := make([]byte, 12)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	},
}

func bsNames(shape string, seed uint64, n int, not map[string]bool) []string {
	r := rand.New(rand.NewPCG(seed, 11))
	set := map[string]bool{}
	var out []string
	for len(out) < n {
		if s := bsShapes[shape](r); !set[s] && !not[s] {
			set[s] = true
			out = append(out, s)
		}
	}
	return out
}

// TestBindingConditionAtTenThousandExclusiveNodes writes P6's binding conditions for
// 10,000 exclusive nodes with controller.BindingTargetsConditions, the function the
// controller writes them with (10,000 kwok nodes would take longer than the test is
// worth), into deploy/webhook's configuration whose webhook is DOWN (nothing listens
// at its address, failurePolicy Fail), and shows that the API server accepts it and
// that a second scheduler's binding onto an unlisted node goes through while one onto
// a listed node is refused, where the former fallback (true) refused both. It logs
// binding throughput per condition.
func TestBindingConditionAtTenThousandExclusiveNodes(t *testing.T) {
	kube := framework.C.Kube
	crt := newCerts(t)
	port, err := localwebhook.FreePort()
	require.NoError(t, err)
	registerWebhooks(t, kube, fmt.Sprintf("127.0.0.1:%d", port), crt.CAPEM)
	t.Cleanup(func() { removeBindingScaleFixture(kube) })
	admin := rest.CopyConfig(framework.C.Config)
	admin.QPS, admin.Burst = 500, 500
	fast, err := kubernetes.NewForConfig(admin)
	require.NoError(t, err)
	binder := bindingIdentity(t, admin)
	schedCfg := rest.CopyConfig(admin)
	schedCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:kube-scheduler"}
	scheduler, err := kubernetes.NewForConfig(schedCfg)
	require.NoError(t, err)

	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bsNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.CreateReadyNode(t, kube, bsNode, "")

	var setups []bsSetup
	for i, shape := range []string{"numbered", "ec2", "random12"} {
		listed := bsNames(shape, uint64(i), 10000, nil)
		set := map[string]bool{}
		for _, n := range listed {
			set[n] = true
		}
		sorted := sortedCopy(listed)
		conds := controller.BindingTargetsConditions(sorted)
		require.NotEqual(t, controller.NotTheScheduler, conds[0].Expression)
		size := 0
		for _, c := range conds {
			size += len(c.Expression)
		}
		// The last listed name lies in the last slice: a binding onto it needs every
		// condition to hold.
		setups = append(setups, bsSetup{name: "10,000 " + shape + fmt.Sprintf(" (%d conditions, %d chars)", len(conds), size), conds: conds, listed: sorted[len(sorted)-1],
			unlisted: bsNames(shape, 99, bsBindingsPerRound*bsRounds, set)})
	}
	// The baseline: no exclusive node, the condition sends no binding at all.
	setups = append(setups, bsSetup{name: "no exclusive node", conds: controller.BindingTargetsConditions(nil),
		unlisted: bsNames("numbered", 99, bsBindingsPerRound*bsRounds, nil)})

	pods := createPendingPods(t, fast, len(setups)*(2*bsBindingsPerRound*bsRounds+1)+1)
	probe := pods[len(pods)-1]
	pods = pods[:len(pods)-1]
	var allListed []string
	for _, s := range setups {
		if s.listed != "" {
			allListed = append(allListed, s.listed)
		}
	}

	elapsed, schedElapsed := map[string]time.Duration{}, map[string]time.Duration{}
	for round := range bsRounds {
		for si, s := range setups {
			writeBindingConditions(t, kube, s.conds)
			waitConditionEffective(t, binder, probe, s, allListed)
			if round == 0 {
				pod := pods[0]
				pods = pods[1:]
				t.Run(s.name+": webhook down, a binding onto a listed node waits, one onto an unlisted node goes through", func(t *testing.T) {
					if s.listed != "" {
						err := bind(binder, pod, s.listed, false)
						require.Error(t, err)
						assert.Contains(t, err.Error(), `failed calling webhook "pod-placement-bindings.runwhere.ai"`)
					}
					require.NoError(t, bind(binder, pod, bsNode, false))
					p, err := kube.CoreV1().Pods(bsNS).Get(ctx, pod, metav1.GetOptions{})
					require.NoError(t, err)
					assert.Equal(t, bsNode, p.Spec.NodeName)
				})
			}
			batch := pods[:bsBindingsPerRound]
			pods = pods[bsBindingsPerRound:]
			targets := s.unlisted[round*bsBindingsPerRound:]
			start := time.Now()
			errs := bindAll(binder, batch, targets)
			elapsed[s.name] += time.Since(start)
			require.Empty(t, errs, "every binding onto an unlisted node goes through with the webhook down (setup %d)", si)
			// kube-scheduler's bindings are never sent; they pay only the conditions.
			batch = pods[:bsBindingsPerRound]
			pods = pods[bsBindingsPerRound:]
			start = time.Now()
			errs = bindAll(scheduler, batch, s.listed4(bsBindingsPerRound))
			schedElapsed[s.name] += time.Since(start)
			require.Empty(t, errs, "kube-scheduler binds onto listed nodes with the webhook down (setup %d)", si)
		}
	}
	for _, s := range setups {
		t.Logf("%s: %d bindings onto unlisted nodes in %v, %.0f bindings/s", s.name, bsBindingsPerRound*bsRounds, elapsed[s.name].Round(time.Millisecond),
			float64(bsBindingsPerRound*bsRounds)/elapsed[s.name].Seconds())
		t.Logf("%s: %d bindings by kube-scheduler in %v, %.0f bindings/s", s.name, bsBindingsPerRound*bsRounds, schedElapsed[s.name].Round(time.Millisecond),
			float64(bsBindingsPerRound*bsRounds)/schedElapsed[s.name].Seconds())
	}

	t.Run("with the fallback (every binding but the scheduler's), a binding onto an unlisted node waits for the webhook too", func(t *testing.T) {
		writeBindingConditions(t, kube, []admissionregistrationv1.MatchCondition{{Name: controller.BindingTargetsCondition, Expression: controller.NotTheScheduler}})
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			err := bind(binder, probe, bsNode, true)
			return err != nil && strings.Contains(err.Error(), `failed calling webhook "pod-placement-bindings.runwhere.ai"`), nil
		}), "every non-scheduler binding is sent: the scope the regular expression avoids")
	})
}

type bsSetup struct {
	name     string
	conds    []admissionregistrationv1.MatchCondition
	listed   string   // a listed node: a binding onto it waits for the webhook
	unlisted []string // targets of the measured bindings
}

// listed4 is n targets for kube-scheduler: the listed node when there is one.
func (s bsSetup) listed4(n int) []string {
	node := s.listed
	if node == "" {
		node = bsNode
	}
	out := make([]string, n)
	for i := range out {
		out[i] = node
	}
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// bindingIdentity is the admin impersonating a user that may only create bindings,
// as a second scheduler (not system:kube-scheduler) would.
func bindingIdentity(t *testing.T, admin *rest.Config) kubernetes.Interface {
	t.Helper()
	_, err := framework.C.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + bsUser},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/binding", "bindings"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = framework.C.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + bsUser},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-" + bsUser},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: bsUser}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.WaitAuthorized(t, bsUser, nil, "create", "", "bindings")
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: bsUser}
	k, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return k
}

// createPendingPods creates n pods no scheduler places (outside pools: they never
// reach the webhook, which is down).
func createPendingPods(t *testing.T, kube kubernetes.Interface, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bs-pod-%d", i)
	}
	errs := parallel(names, func(name string, _ int) error {
		p := newPod(name, nil, nil)
		p.Spec.SchedulerName = "no-such-scheduler"
		_, err := kube.CoreV1().Pods(bsNS).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	require.Empty(t, errs)
	return names
}

func bind(kube kubernetes.Interface, pod, node string, dryRun bool) error {
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return kube.CoreV1().Pods(bsNS).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}, opts)
}

// bindAll binds pods[i] onto targets[i], 8 at a time.
func bindAll(kube kubernetes.Interface, pods, targets []string) []error {
	return parallel(pods, func(pod string, i int) error { return bind(kube, pod, targets[i], false) })
}

func parallel(items []string, f func(string, int) error) []error {
	var mu sync.Mutex
	var errs []error
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				if err := f(items[i], i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range items {
		work <- i
	}
	close(work)
	wg.Wait()
	return errs
}

// writeBindingConditions replaces P6's binding conditions, as the controller's patch
// does; the API server compiles them when it validates the update.
func writeBindingConditions(t *testing.T, kube kubernetes.Interface, conds []admissionregistrationv1.MatchCondition) {
	t.Helper()
	cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, controller.WebhookConfiguration, metav1.GetOptions{})
	require.NoError(t, err)
	wi := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return w.Name == controller.PlacementBindingsWebhook
	})
	require.GreaterOrEqual(t, wi, 0)
	cfg.Webhooks[wi].MatchConditions = controller.WithBindingTargets(cfg.Webhooks[wi].MatchConditions, conds)
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
	require.NoError(t, err, "the API server accepts %d conditions", len(conds))
}

// waitConditionEffective waits until the API server judges bindings by s.expr: a
// dry-run binding onto its listed node is refused (the webhook is down) while one onto
// an unlisted node goes through, or, with no
// listed node, dry-run bindings onto every setup's listed node go through.
func waitConditionEffective(t *testing.T, binder kubernetes.Interface, probe string, s bsSetup, allListed []string) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if s.listed != "" {
			// Both halves: the configuration before (the fallback sends every binding)
			// also refuses the listed node, so only a binding onto an unlisted node
			// going through shows that the API server has this one.
			err := bind(binder, probe, s.listed, true)
			return err != nil && strings.Contains(err.Error(), "failed calling webhook") && bind(binder, probe, bsNode, true) == nil, nil
		}
		for _, n := range allListed {
			if bind(binder, probe, n, true) != nil {
				return false, nil
			}
		}
		return true, nil
	}), "the API server uses the condition of %s", s.name)
}

func removeBindingScaleFixture(kube kubernetes.Interface) {
	bg := context.Background()
	_ = kube.CoreV1().Namespaces().Delete(bg, bsNS, metav1.DeleteOptions{})
	_ = kube.CoreV1().Nodes().Delete(bg, bsNode, metav1.DeleteOptions{})
	_ = kube.RbacV1().ClusterRoleBindings().Delete(bg, "e2e-"+bsUser, metav1.DeleteOptions{})
	_ = kube.RbacV1().ClusterRoles().Delete(bg, "e2e-"+bsUser, metav1.DeleteOptions{})
}
