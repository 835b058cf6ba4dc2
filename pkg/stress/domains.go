package stress

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// A run by domain (spec.domains) tests a pool's unit domains (super nodes, NVLink
// racks) whole: a link test such as hccs needs every server of the domain at once, so
// a domain's members run each test together, and a domain is tested only when all of
// its members are idle. A domain with one member busy, cordoned or NotReady is skipped
// whole, with that member's reason, as a busy node is skipped in a run node by node:
// a stress test never competes with real work, and never waits for it.

// PlanDomains is Plan by unit domain of pool (its spec.topology): the members of a
// domain with a member that is not idle are all skipped, naming that member and why;
// members outside every domain are skipped. It returns the targets and each domain's
// result to be (Pending, or Skipped with the reason). T4 is checked first: a pool
// without a topology, or without a domain, is refused with the field named.
func PlanDomains(ctx context.Context, kube kubernetes.Interface, namespace string, pool *v1alpha1.Pool, poolName string) ([]Target, []v1alpha1.StressDomainResult, error) {
	targets, members, err := plan(ctx, kube, namespace, poolName, nil)
	if err != nil {
		return nil, nil, err
	}
	nodes := make([]*corev1.Node, 0, len(members))
	for _, n := range members {
		nodes = append(nodes, n)
	}
	if err := policy.CheckStressDomains(pool, poolName, nodes); err != nil {
		return nil, nil, err
	}
	t, _ := policy.ResolveTopology(pool.Spec.Topology) // CheckStressDomains resolved it
	targets, domains := ByDomain(t, nodes, targets)
	return targets, domains, nil
}

// ByDomain spreads each member's skip reason over its unit domain: targets (one per
// member, sorted by node) come back with every member of a domain that is not wholly
// idle skipped, and the members outside every domain skipped; the domains, sorted by
// name, are Pending or Skipped.
func ByDomain(t policy.Topology, members []*corev1.Node, targets []Target) ([]Target, []v1alpha1.StressDomainResult) {
	grouped, _ := t.GroupByDomain(members)
	domainOf := map[string]string{}
	for d, ns := range grouped {
		for _, n := range ns {
			domainOf[n.Name] = d
		}
	}
	reasons := map[string][]string{}
	for _, tg := range targets {
		if d, ok := domainOf[tg.Node]; ok && tg.Skip != "" {
			reasons[d] = append(reasons[d], tg.Node+" "+tg.Skip)
		}
	}
	out := make([]Target, len(targets))
	for i, tg := range targets {
		d, ok := domainOf[tg.Node]
		switch {
		case !ok:
			tg.Skip = fmt.Sprintf("outside every domain (lacks a label of %s)", strings.Join(t.Levels, ", "))
		case len(reasons[d]) > 0:
			tg.Skip = fmt.Sprintf("domain %s not idle: %s", d, strings.Join(reasons[d], "; "))
		}
		out[i] = tg
	}
	var domains []v1alpha1.StressDomainResult
	for d, ns := range grouped {
		res := v1alpha1.StressDomainResult{Domain: d, Outcome: v1alpha1.StressOutcomePending}
		for _, n := range ns {
			res.Members = append(res.Members, n.Name)
		}
		slices.Sort(res.Members)
		if len(reasons[d]) > 0 {
			res.Outcome, res.Message = v1alpha1.StressOutcomeSkipped, "not idle: "+strings.Join(reasons[d], "; ")
		}
		domains = append(domains, res)
	}
	slices.SortFunc(domains, func(a, b v1alpha1.StressDomainResult) int { return strings.Compare(a.Domain, b.Domain) })
	return out, domains
}

// domainIndex maps each member of a tested domain to its domain's index in st.Domains.
func domainIndex(st *v1alpha1.StressRunStatus) map[string]int {
	idx := map[string]int{}
	for i, d := range st.Domains {
		if d.Outcome == v1alpha1.StressOutcomeSkipped {
			continue
		}
		for _, m := range d.Members {
			idx[m] = i
		}
	}
	return idx
}

// mayStart says whether test res of a run by domain may start: every member of its
// domain has ended the tests before it, and none failed one (a domain with a failed
// member runs no further test: its link test has failed). A run node by node starts
// every test at once.
func mayStart(run *v1alpha1.StressRun, st *v1alpha1.StressRunStatus, res *v1alpha1.StressNodeResult) bool {
	if !run.Spec.Domains {
		return true
	}
	i, ok := domainIndex(st)[res.Node]
	if !ok {
		return true
	}
	order := slices.Index(run.Spec.Tests, res.Test)
	for _, r := range st.Results {
		if !slices.Contains(st.Domains[i].Members, r.Node) {
			continue
		}
		if r.Outcome == v1alpha1.StressOutcomeFailed || slices.Index(run.Spec.Tests, r.Test) < order && !r.Outcome.Final() {
			return false
		}
	}
	return true
}

// stopFailedDomains: in a domain whose member failed a test, the tests not started on
// the other members do not run (NotRun, naming the member): the domain's link test has
// failed, and those members are not judged on tests they did not run.
func stopFailedDomains(st *v1alpha1.StressRunStatus) {
	for _, d := range st.Domains {
		failed := failedMembers(st.Results, d.Members)
		if len(failed) == 0 {
			continue
		}
		for i := range st.Results {
			r := &st.Results[i]
			if r.Outcome == v1alpha1.StressOutcomePending && slices.Contains(d.Members, r.Node) {
				r.Outcome, r.Message = v1alpha1.StressOutcomeNotRun, fmt.Sprintf("domain %s: %s failed first", d.Domain, strings.Join(failed, ", "))
			}
		}
	}
}

// tallyDomains sets each tested domain's outcome from its members' results: Failed
// once a member failed (naming it), else Aborted, Passed when every test of every
// member passed, Running once a test started.
func tallyDomains(st *v1alpha1.StressRunStatus) {
	for i := range st.Domains {
		d := &st.Domains[i]
		if d.Outcome == v1alpha1.StressOutcomeSkipped {
			continue
		}
		d.FailedMembers = failedMembers(st.Results, d.Members)
		final, started, aborted := true, false, false
		for _, r := range st.Results {
			if !slices.Contains(d.Members, r.Node) {
				continue
			}
			final = final && r.Outcome.Final()
			started = started || r.Outcome != v1alpha1.StressOutcomePending
			aborted = aborted || r.Outcome == v1alpha1.StressOutcomeAborted
		}
		switch {
		case len(d.FailedMembers) > 0:
			d.Outcome, d.Message = v1alpha1.StressOutcomeFailed, fmt.Sprintf("%d of %d member(s) failed: %s", len(d.FailedMembers), len(d.Members), strings.Join(d.FailedMembers, ", "))
		case aborted:
			d.Outcome, d.Message = v1alpha1.StressOutcomeAborted, ""
		case final:
			d.Outcome, d.Message = v1alpha1.StressOutcomePassed, fmt.Sprintf("%d member(s) passed", len(d.Members))
		case started:
			d.Outcome = v1alpha1.StressOutcomeRunning
		}
	}
}

// failedMembers are the members that failed a test, sorted.
func failedMembers(rs []v1alpha1.StressNodeResult, members []string) []string {
	var out []string
	for _, r := range rs {
		if r.Outcome == v1alpha1.StressOutcomeFailed && slices.Contains(members, r.Node) && !slices.Contains(out, r.Node) {
			out = append(out, r.Node)
		}
	}
	slices.Sort(out)
	return out
}

// FailedDomains are the domains of a run by domain that failed, sorted.
func FailedDomains(st *v1alpha1.StressRunStatus) []string {
	var out []string
	for _, d := range st.Domains {
		if d.Outcome == v1alpha1.StressOutcomeFailed {
			out = append(out, d.Domain)
		}
	}
	return out
}

// domainsTested are the domains of a run by domain that are not skipped.
func domainsTested(st *v1alpha1.StressRunStatus) []string {
	var out []string
	for _, d := range st.Domains {
		if d.Outcome != v1alpha1.StressOutcomeSkipped {
			out = append(out, d.Domain)
		}
	}
	return out
}
