package policy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// CheckDriverRollout judges a DriverRollout as created by any client, so that one made
// with plain kubectl gets the checks `upgrade driver` makes before it creates one: the
// target is a version a node label can hold (U2), and the rollout reaches nodes that are
// there (U5): a pool rollout's pool has members and its canary is one of them; a node
// rollout's nodes exist. members are the nodes labelled with spec.pool; missing are the
// spec.nodes that do not exist. The compatibility pre-flight (C1) is compat's.
func CheckDriverRollout(spec v1alpha1.DriverRolloutSpec, members, missing []string) error {
	if err := validateDriverVersion("spec.version", spec.Version); err != nil {
		return err
	}
	if spec.Pool != "" {
		if len(members) == 0 {
			return Violationf("U5", "spec.pool %q has no nodes (no node carries %s=%s): name a pool with members, or its nodes in spec.nodes", spec.Pool, LabelPool, spec.Pool)
		}
		if spec.Canary != "" && !slices.Contains(members, spec.Canary) {
			return Violationf("U5", "spec.canary %q is not a member of pool %q: name one of %s", spec.Canary, spec.Pool, listSome(members))
		}
	}
	if len(missing) > 0 {
		return Violationf("U5", "spec.nodes names nodes that do not exist: %s; name existing nodes", strings.Join(missing, ", "))
	}
	return nil
}

// CheckStressRun judges a StressRun as created by any client, as `stress run` does before
// it creates one (T3): the pool exists (a Pool object or nodes labelled with it) and the
// nodes the run names are its members, so that a run cannot put privileged test pods on
// nodes outside the pool it names.
func CheckStressRun(spec v1alpha1.StressRunSpec, poolExists bool, members []string) error {
	if !poolExists {
		return Violationf("T3", "spec.pool %q does not exist (no Pool object, no node labelled %s=%s): name an existing pool", spec.Pool, LabelPool, spec.Pool)
	}
	var outside []string
	for _, n := range spec.Nodes {
		if !slices.Contains(members, n) {
			outside = append(outside, n)
		}
	}
	if len(outside) > 0 {
		return Violationf("T3", "spec.nodes %s are not members of pool %q: name members (%s) or leave spec.nodes out to test them all",
			strings.Join(outside, ", "), spec.Pool, listSome(members))
	}
	return nil
}

// listSome names up to ten items, sorted, and how many more there are.
func listSome(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	items = slices.Sorted(slices.Values(items))
	if len(items) <= 10 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:10], ", "), len(items)-10)
}

// FieldStressDomains is the StressRun field of a run by domain.
const FieldStressDomains = "spec.domains"

// CheckStressDomains is rule T4: a stress run by domain (spec.domains, the plugin's
// --domains) needs a pool with a valid topology whose members form at least one unit
// domain; a pool without one would test nothing as a domain. pool is the Pool object
// (nil when there is none), members its nodes.
func CheckStressDomains(pool *v1alpha1.Pool, poolName string, members []*corev1.Node) error {
	if !HasTopology(pool) {
		return fieldViolationf("T4", FieldStressDomains, "%s tests a pool by unit domain, and pool %q has no topology (no spec.topology): run without --domains (spec.domains) to test node by node, or declare the pool's topology first",
			FieldStressDomains, poolName)
	}
	t, err := ResolveTopology(pool.Spec.Topology)
	if err != nil {
		return err
	}
	if domains, _ := t.GroupByDomain(members); len(domains) == 0 {
		return fieldViolationf("T4", FieldStressDomains, "%s tests a pool by unit domain, and none of pool %q's %d node(s) is in one (each lacks a label of %s): run without --domains (spec.domains), or label the nodes",
			FieldStressDomains, poolName, len(members), strings.Join(t.Levels, ", "))
	}
	return nil
}
