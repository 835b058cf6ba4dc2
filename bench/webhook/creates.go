package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
)

// variant is a P6 configuration to measure beside the deployed one (--p6-variant).
type variant struct{ name, file string }

// defaultSetups are the pod-create setups make bench alternates.
var defaultSetups = []string{"none", "trivial", "trivial+p6", "litepool-no-p6", "litepool", "gogc25"}

// createSetup is one way pods are admitted in a pod-create round.
type createSetup struct {
	key, name string
	// addr is the webhook called ("" for none); own starts a webhook process of its
	// own for the setup's rounds, with this environment.
	addr    string
	own     []string
	configs *webhookConfigs // registered at addr; nil for none
}

// createSetups builds the setups c.setups names:
//   - none: no webhook;
//   - trivial: a trivial mutating webhook (adds the nodeSelector and nothing else; P1's
//     configuration alone, whose selectors the API server checks without CEL): what the
//     API server's webhook machinery itself costs;
//   - trivial+p6: the same with P6's configuration beside it (its match conditions keep
//     these pods off the wire): what registering P6 costs the API server whoever serves
//     it; trivial+NAME the same with a --p6-variant's configuration instead;
//   - litepool-no-p6 and litepool: litepool-webhook without its P6 entries (as before
//     P6) and with every configuration;
//   - gogc25: litepool-webhook with GOGC=25 (its fixed pace before internal/gcpace)
//     instead of its paced default, started for its own rounds only (its informers would
//     load the API server in the others): what a heap held at 1.25x the live one costs
//     pod creates.
func createSetups(c config, addr, baseAddr string) ([]createSetup, error) {
	deployed, err := loadConfigs(filepath.Join(c.root, "deploy", "webhook", "webhooks.yaml"))
	if err != nil {
		return nil, err
	}
	p1 := func(h admissionregistrationv1.MutatingWebhook) bool { return h.Name == podsWebhook }
	all := func(admissionregistrationv1.MutatingWebhook) bool { return true }
	none := func(admissionregistrationv1.ValidatingWebhook) bool { return false }
	notPlacement := func(h admissionregistrationv1.ValidatingWebhook) bool { return !isPlacement(h) }
	trivial := deployed.keep(p1, none)
	trivialP6 := deployed.keep(p1, isPlacement)
	noP6 := deployed.keep(all, notPlacement)
	known := map[string]createSetup{
		"none":           {key: "none", name: "without webhook"},
		"trivial":        {key: "trivial", name: "trivial webhook", addr: baseAddr, configs: &trivial},
		"trivial+p6":     {key: "trivial+p6", name: "trivial + P6 config", addr: baseAddr, configs: &trivialP6},
		"litepool-no-p6": {key: "litepool-no-p6", name: "litepool before P6", addr: addr, configs: &noP6},
		"litepool":       {key: "litepool", name: "litepool-webhook", addr: addr, configs: &deployed},
		"gogc25":         {key: "gogc25", name: "litepool, GOGC=25", own: []string{"GOGC=25"}, configs: &deployed},
	}
	for _, v := range c.variants {
		w, err := loadConfigs(v.file)
		if err != nil {
			return nil, err
		}
		w = w.keep(func(admissionregistrationv1.MutatingWebhook) bool { return false }, isPlacement)
		w.mut = trivial.mut
		known["trivial+"+v.name] = createSetup{key: "trivial+" + v.name, name: "trivial + " + v.name, addr: baseAddr, configs: &w}
	}
	var out []createSetup
	for _, k := range c.setups {
		s, ok := known[k]
		if !ok {
			return nil, fmt.Errorf("no pod-create setup %q (--setups: %v and trivial+ a --p6-variant's name)", k, defaultSetups)
		}
		out = append(out, s)
	}
	return out, nil
}

// benchCreates alternates the setups round by round and prints each round, then the
// figures of the setups that ran.
func benchCreates(ctx context.Context, c config, kube kubernetes.Interface, dir string, caPEM []byte, addr, baseAddr string) error {
	setups, err := createSetups(c, addr, baseAddr)
	if err != nil {
		return err
	}
	fmt.Printf("\npod creates through kube-apiserver: %d pods per round, %d at a time, labelled runwhere.ai/pool=train-a100 (never scheduled)\n", c.pods, c.podConc)
	fmt.Printf("%-24s %10s %10s %10s %12s %12s %12s %12s %12s\n", "round", "creates/s", "p50 ms", "p99 ms", "API CPU ms", "litepool ms", "trivial ms", "bench ms", "conditions µs")
	results := map[string][]result{}
	for r := 1; r <= c.rounds; r++ {
		// Each round starts one setup later than the one before, so that no setup
		// always follows the same one (whose namespace the API server may still be
		// removing) or always runs first: over a multiple of len(setups) rounds every
		// setup has every place once.
		for k := range setups {
			i := (k + r - 1) % len(setups)
			s := setups[i]
			res, err := createRound(ctx, c, kube, dir, caPEM, s, fmt.Sprintf("bench-%d-%d", i, r))
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			results[s.key] = append(results[s.key], res)
			printRound(fmt.Sprintf("%s #%d", s.name, r), res)
		}
	}
	for _, s := range setups {
		printRound("mean "+s.name, mean(results[s.key]))
	}
	reportCreates(c, setups, results)
	return nil
}

// createRound registers s (starting its own webhook first if it has one), creates
// c.pods pods in namespace, and removes what it registered and started.
func createRound(ctx context.Context, c config, kube kubernetes.Interface, dir string, caPEM []byte, s createSetup, namespace string) (result, error) {
	var err error
	pid, stopOwn, addr := webhookPID, func() {}, s.addr
	if s.own != nil {
		if addr, stopOwn, pid, _, err = startWebhookProc(ctx, c, dir, "webhook-"+namespace, s.own); err != nil {
			return result{}, err
		}
	}
	defer stopOwn()
	if s.configs != nil {
		unregister, err := registerConfigs(ctx, kube, addr, caPEM, *s.configs)
		if err != nil {
			return result{}, err
		}
		defer unregister()
	}
	return podRound(ctx, kube, c, namespace, pid)
}

// reportCreates prints the figures of the setups that ran and records make bench's.
func reportCreates(c config, setups []createSetup, results map[string][]result) {
	has := func(keys ...string) bool {
		for _, k := range keys {
			if len(results[k]) == 0 {
				return false
			}
		}
		return true
	}
	m := func(k string) result { return mean(results[k]) }
	if has("none", "trivial", "trivial+p6", "litepool-no-p6", "litepool") {
		// cost of a create, in the time one create takes at the measured throughput:
		// 1/rate with a webhook against 1/rate without.
		cost := func(k string) float64 { return m("none").rate / m(k).rate }
		fmt.Printf("cost of a create (time per create, 1 = without webhook): trivial %.3f, trivial + P6 config %.3f, litepool before P6 %.3f, litepool %.3f\n",
			cost("trivial"), cost("trivial+p6"), cost("litepool-no-p6"), cost("litepool"))
	}
	if has("trivial", "litepool") {
		fmt.Printf("litepool against the trivial webhook (means): %.3fx\n", m("trivial").rate/m("litepool").rate)
		// The goal is judged per round: each round ran every setup back to back, so a
		// round's ratio compares like with like, and the spread of the ratios says
		// whether the machine was quiet enough to tell.
		s := ratioSpread(results["trivial"], results["litepool"])
		fmt.Printf("litepool / trivial per round (%d rounds): min %.3fx, median %.3fx, max %.3fx: %s\n",
			len(s.ratios), s.min, s.median, s.max, s.verdict(createsGoal))
		record(c, "webhook.creates", s.median)
		record(c, "webhook.creates-min", s.min)
		record(c, "webhook.creates-max", s.max)
	}
	// Throughput on shared cores moves with whatever else runs; CPU time per create
	// moves much less: it is what the API server and etcd spend, however long they wait.
	if c.clusterDir != "" && has("trivial") {
		fmt.Println("per create, rounds' median [min, max]: API server + etcd CPU (ms); the same over the trivial webhook's in the same round; the API server's time in match conditions (µs, its own metric)")
		for _, s := range setups {
			cpu := spreadOf(results[s.key], func(r result) float64 { return ms(r.cpuServer) })
			over := diffSpread(results[s.key], results["trivial"], func(r result) float64 { return ms(r.cpuServer) })
			match := spreadOf(results[s.key], func(r result) float64 { return float64(r.match) / float64(time.Microsecond) })
			fmt.Printf("  %-24s %.3f [%.3f, %.3f]   %+.3f [%+.3f, %+.3f]   %.1f [%.1f, %.1f]\n", s.name, cpu.median, cpu.min, cpu.max,
				over.median, over.min, over.max, match.median, match.min, match.max)
		}
		if has("litepool") {
			cpu := cpuRatioSpread(results["litepool"], results["trivial"])
			fmt.Printf("API server + etcd CPU per create, litepool / trivial per round: min %.3fx, median %.3fx, max %.3fx; litepool-webhook's own %.3f ms\n",
				cpu.min, cpu.median, cpu.max, ms(m("litepool").cpuWebhook))
			record(c, "webhook.creates-cpu", cpu.median)
		}
	}
	if has("trivial", "litepool") {
		// Each webhook process's own CPU per create, read from /proc in the rounds that
		// call it: what a webhook costs the cores it shares with the API server. Its
		// spread is small where the throughput's is not (issue 43).
		own := ownCPURatioSpread(results["litepool"], results["trivial"])
		fmt.Printf("own CPU per create, litepool-webhook / trivial webhook per round: min %.2fx, median %.2fx, max %.2fx (litepool %.3f ms, trivial %.3f ms, means; goal <= %.1fx)\n",
			own.min, own.median, own.max, ms(m("litepool").cpuWebhook), ms(m("trivial").cpuBaseline), ownCPUGoal)
		record(c, "webhook.own-cpu", own.median)
	}
	if has("trivial", "trivial+p6", "litepool-no-p6", "litepool") {
		fmt.Printf("P6's configuration alone (match conditions, no call): %.0f creates/s without, %.0f with (%+.1f%%); in litepool: %.0f before, %.0f after (%+.1f%%)\n",
			m("trivial").rate, m("trivial+p6").rate, 100*(m("trivial+p6").rate-m("trivial").rate)/m("trivial").rate,
			m("litepool-no-p6").rate, m("litepool").rate, 100*(m("litepool").rate-m("litepool-no-p6").rate)/m("litepool-no-p6").rate)
	}
	if has("trivial+p6", "litepool") {
		fmt.Printf("litepool against the trivial webhook with P6's configuration (means): %.3fx\n", m("trivial+p6").rate/m("litepool").rate)
		record(c, "webhook.creates-p6", m("trivial+p6").rate/m("litepool").rate)
	}
	if has("trivial", "gogc25", "litepool") {
		fmt.Printf("litepool's GC pace (internal/gcpace, docs/webhook.md, Memory): %.0f creates/s paced, %.0f at GOGC=25 (%+.1f%%); its CPU per create %.3f ms and %.3f ms\n",
			m("litepool").rate, m("gogc25").rate, 100*(m("gogc25").rate-m("litepool").rate)/m("litepool").rate, ms(m("litepool").cpuWebhook), ms(m("gogc25").cpuWebhook))
		record(c, "webhook.creates-gogc25", m("trivial").rate/m("gogc25").rate)
	}
}

// spreadOf is the min, median and max of f over rs.
func spreadOf(rs []result, f func(result) float64) spread {
	var s spread
	for _, r := range rs {
		s.ratios = append(s.ratios, f(r))
	}
	return s.summarize()
}

// diffSpread is f(a) - f(b) round by round.
func diffSpread(a, b []result, f func(result) float64) spread {
	var s spread
	for i := range a {
		if i < len(b) {
			s.ratios = append(s.ratios, f(a[i])-f(b[i]))
		}
	}
	return s.summarize()
}

// cpuRatioSpread is a's API-server CPU per create over b's, round by round.
func cpuRatioSpread(a, b []result) spread {
	var s spread
	for i := range a {
		if i < len(b) && b[i].cpuServer > 0 {
			s.ratios = append(s.ratios, float64(a[i].cpuServer)/float64(b[i].cpuServer))
		}
	}
	return s.summarize()
}

// ownCPUGoal is issue 43's goal: litepool-webhook's own CPU per admitted pod at most
// twice the trivial webhook's, measured in the same run.
const ownCPUGoal = 2.0

// ownCPURatioSpread is litepool-webhook's own CPU per create in a's rounds over the
// trivial webhook's in b's, round by round.
func ownCPURatioSpread(a, b []result) spread {
	var s spread
	for i := range a {
		if i < len(b) && b[i].cpuBaseline > 0 {
			s.ratios = append(s.ratios, float64(a[i].cpuWebhook)/float64(b[i].cpuBaseline))
		}
	}
	return s.summarize()
}
