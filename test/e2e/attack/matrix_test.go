// Package attack is the attack matrix: for every right that reaches litepool's inputs,
// the worst writes that right allows, made as an identity that holds exactly that
// right (impersonation; a plain HTTPS client for network reach), and what must hold
// afterwards: litepool did nothing the right does not give directly. The table is the
// threat model printed in docs/security.md; TestMatrixIsDocumented keeps the two equal.
// A mechanism that exempts, trusts or runs something adds its rows here.
package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) {
	framework.MainWithWebhook(m, "attack", append(append([]string{"--controllers"}, nodeWorkFlags...), pullSecretFlags...)...)
}

// row is one attack: who, with which right, writes what, and what must hold.
type row struct {
	right  string // the right, as RBAC (or the network) grants it
	attack string // the worst write that right allows against litepool
	holds  string // what must hold afterwards
	item   string // where it was found (issue 28 item), if anywhere
	run    func(t *testing.T)
}

// matrix is the table, in the order docs/security.md prints it.
var matrix = []row{
	{"edit in a namespace", "pod with nodeName on an exclusive node, tolerating everything", "refused (P6); no pod on the node", "", attackNodeName},
	{"edit in a namespace", "pod labelled with a pool the namespace may use, nodeName on an exclusive node, tolerating everything (the placement entries leave labelled pods to the mutating call)", "refused (P6, judged by the pods.runwhere.ai call); no pod on the node", "30", attackLabelledNodeName},
	{"edit in a namespace", "the same pod labelled runwhere.ai/pool=default, and labelled with an empty value", "refused (P6: pod-placement-default-label, and the mutating call for the empty value); no pod on the node", "30", attackDefaultLabelNodeName},
	{"edit in a namespace", "pod whose ownerReferences name the tenant's own DaemonSet (controller: true), nodeName on an exclusive node, 8 GPUs", "refused (P6): ownerReferences are a claim; no pod on the node", "28.1", attackForgedDaemonSetOwner},
	{"edit in a namespace", "a real DaemonSet tolerating everything whose pods ask for 8 GPUs", "its pods are refused on exclusive nodes (P6: node agents ask for no devices; P4 first where the pool does not admit the namespace, since each pod is pinned to its node) and on the members of a namespace-restricted pool that does not admit it (P4: a DaemonSet pod asking for devices is judged by its pin)", "28.1", attackDaemonSetWithGPUs},
	{"edit in a namespace", "pod with a schedulingGate tolerating everything, made while its node was not exclusive; gate removed after", "the gate's removal is refused (P6); the pod never runs on the node", "28.9", attackSchedulingGate},
	{"edit in a namespace", "pods asking for a pool that does not exist, and for a pool that does not admit the namespace", "refused (P2, P4) without naming other pools or their namespaces", "28.10", attackDenialsLeakNothing},
	{"edit in a namespace", "pod without the pool label, pinned to an exclusive pool by `nodeSelector runwhere.ai/pool` and tolerating its taint (what Kueue's flavor writes on the Jobs it admits), from a namespace the pool does not admit; the same labelled `runwhere.ai/pool: default`", "refused (P4: a pod pinned to a pool is labelled with it and judged as its pod, by the entry `pods-node-selector.runwhere.ai`); the one labelled `default` refused (P4, P1: judged as the pool's pod too, by `pods-pinned-default-label.runwhere.ai`); no pod on the pool's nodes", "", attackPinnedByNodeSelector},
	{"create bindings (a scheduler)", "POST /api/v1/namespaces/NS/bindings of a foreign pod onto an exclusive node", "refused (P6), as pods/binding is; the pod stays unbound", "28.2", attackBindingsResource},
	{"create bindings (a scheduler)", "pods/NAME/binding of a foreign pod onto an exclusive node", "refused (P6); the pod stays unbound", "", attackPodsBinding},
	{"create bindings (a scheduler)", "pods/NAME/binding onto an exclusive node of a pod whose ownerReferences name a DaemonSet and that does not tolerate the pool's taint", "refused (P6): the claim counts only on a node whose taint the pod tolerates; the pod stays unbound", "28.1", attackBindClaimedAgent},
	{"network reach to the webhook Service (no credentials)", "AdmissionReviews posted to /validate-nodes: DELETE of members with a forged NotReady, forced oldObject; a review naming an unknown pool", "no reservation written, no ConfigMap created; a safe departure by an operator is still accepted", "28.3", attackForgedReviews},
	{"the webhook's ServiceAccount (litepool-webhook)", "update its webhook configurations: rules, clientConfig, matchPolicy, failurePolicy", "refused (ValidatingAdmissionPolicy litepool-webhook-config-guard); only caBundle may change", "28.7", attackWebhookRewritesItsConfig},
	{"the controller's ServiceAccount (litepool-controller)", "patch the validating configuration beyond the binding-targets conditions", "refused (litepool-webhook-config-guard); the `binding-onto-an-exclusive-node(-N)` conditions of `pod-placement-bindings.runwhere.ai` may change, be added or be removed; every other condition keeps its name, expression and order. Since issue 43 the scheduler's exemption is part of those conditions (one condition fewer for every binding): writing `true` sends the scheduler's bindings to P6 too, which only makes them wait on the webhook, less than the identity's own `patch nodes` (a NoSchedule taint on every node) can do, and the controller writes its conditions back", "28.7, 43", attackControllerRewritesConfig},
	{"patch nodes", "remove an exclusive member's taint", "the controller puts it back (the pool's policy)", "", attackRemoveTaint},
	{"patch nodes/status (Node Problem Detector)", "remove a member's pool label through nodes/status below minNodes", "refused (N3), as through nodes", "", attackStatusLabel},
	{"create resourceslices (a DRA driver)", "publish a ResourceSlice for an exclusive member", "nothing follows from it: no taint or cordon changes, a safe departure is still accepted", "", attackResourceSlice},
	{"update pools/status (the right `health release` used to need)", "`status.nodeHealth` of a member held out by `health hold`: its entry set to `Released` (the old order), then removed", "the node stays out (quarantine taint, entry `HeldOut` again): orders are in `spec.health`, and the loop checks each entry against the node's taint; `health release` still returns it", "32", attackStatusRelease},
	{"update pools", "`spec.health.remediation` with the editor's own image and command", "not run: a Pool only names an operator's definition (`--health-definition` of the controller's Deployment); the node is held out (`NoDefinition`) and no Job is made", "28.4", attackEditorsRemediation},
	{"update pools", "name an operator's definition (beside an image and command of the editor's), list a condition a member has", "**residual**: the editor chooses which of the operator's definitions runs, on the pool's nodes, when a listed condition holds; the Job runs the definition's image and command, with no token", "", attackEditorNamesADefinition},
	{"update pools", "a re-check with no definition, with a stress image `--health-images` approves and the editor's tests", "**residual**: runs unprivileged in litepool's namespace, holds the node's accelerators, no host access, no token", "", attackEditorsRecheck},
	{"update pools", "`spec.upgrade` installer image and command", "run only when an operator runs `upgrade driver` without `-- COMMAND`; the dry run and the confirmation show both, and the confirmation says they come from the Pool (nothing is created until it is answered yes)", "28.5", attackEditorsInstaller},
	{"update pools/status", "`status.nodeHealth` entry `{state: Quarantined, fatal: true}` for a healthy member of a pool that drains, in one write, or in two (a reason naming a fatal condition, then `fatal: true`)", "no drain: a drain starts and goes on only while the node shows a fatal signal; the member's pod stays", "28.6", attackForgedFatalEntry},
	{"update pools/status", "an entry naming another owner's Job (a rollout's installer) and someone's StressRun", "neither deleted: the loop deletes only what its Pool controls (uid precondition)", "28.6", attackForgedEntryNamesOthersWork},
	{"update pools/status", "`{state: Quarantined, fatal: true}` entries for every member of a 4-member pool with `maxQuarantinedPercent: 25`, a remediation and a re-check definition", "at most 1 member tainted at any moment: an entry that no signal, hold or quarantine taint backs counts against the breaker and past it is not honoured (dropped, Event `HealthEntryNotHonoured`); the one honoured is a quarantine (`Unbacked`, not fatal: no drain, no remediation) that returns once its re-check passed and its hold time ended", "38", attackForgedEntriesPastTheBreaker},
	{"update pools/status", "rewrite a quarantined member's entry to have it returned: `Released`, `Healthy`, removed, `Holding` dated back with no re-check run", "the node stays out (tainted): a tainted node whose entry does not hold it out is held out (`Unaccounted`), `Holding` needs a passed re-check run of its Pool; orders are read only from `spec.health`", "32", attackRewriteAQuarantinedEntry},
	{"update pools (`litepool-health-operator`)", "`spec.health.hold` of a member, then `spec.health.release`, one dated before its quarantine and one after", "**by design** a Pool editor holds and returns its pool's nodes (as removing `spec.health` does); the old release returns nothing that went out after it (the quarantine taint's time, which only the controller and writers of nodes set)", "", attackHealthOperatorRelease},
	{"edit in a namespace", "a pod copying the installer's name and labels, to pass as node work, on a member of a pool that drains", "treated as the tenant's pod: evicted by the drain of a fatal fault (node work is known by litepool's namespace, which tenants cannot write)", "", attackInstallerLookalike},
	{"create driverrollouts (`litepool-operator`)", "a rollout naming any installer image", "**by design**: accepted; the rollout is the operator's approval of its image, root on the nodes it names (say so when you grant the role)", "", attackOperatorsRollout},
	{"create stressruns (`litepool-operator`)", "a run naming any image, on a pool's nodes", "**by design**: the run is its image's approval, as a rollout's is its installer's. Its test pods are built by `pkg/nodejob` like every piece of node work, without host access (no privilege, host namespaces or host path), with no token, in litepool's namespace", "", attackOperatorsStressRun},
	{"(any pod of node work)", "read the namespace's default ServiceAccount token", "none mounted: the remediation Jobs and the re-check and stress pods the rows above made set `automountServiceAccountToken: false` and carry no token volume", "28.8", attackNodeWorkTokens},
	{"patch nodes", "move members of a pool with a topology between its super nodes: rewrite `huawei.com/topotree.superpodid` of a member that runs a pod and of an idle one, remove it from a third", "admitted (topology labels are their agents' and never refused); litepool cordons, taints, evicts and removes nothing in answer, and the pool's accelerator total stays what its members offer (capacity is per member, never per domain)", "40", attackMoveBetweenDomains},
	{"patch nodes", "bring a super node down to minNodesPerDomain by moving a member out of it, then remove the pool label of another of its members", "the departure is refused (N3: the domain floor counts the members the super node has at the departure); the floor guards against mistakes, not against this right, which may override N3 with the audited `runwhere.ai/force` as for minNodes", "40", attackShrinkDomainThenDepart},
	{"patch nodes", "move a busy member of a pool with a topology into another super node, so that its own looks idle, before an operator's stress run by domain (`stress run --domains`)", "the labels decide only the grouping: the super node it joined is skipped whole (the busy member named), its old one is tested without it, and no test pod is made on the busy node (a member is tested only when it is idle itself)", "41", attackStressByDomainRelabel},
	{"patch nodes", "a pool with a topology and `spec.health.domainOutPercent: 50`: move 2 healthy members out of a rack with 1 quarantined member of its 4, then move that member into a rack with 1 quarantined member of its 3", "no rack goes out and litepool taints no member in answer: a fault counts toward the domain its episode began in and with that domain's size then (the entry's `domain` and `domainSize`, which the controller records when the node goes out)", "41", attackDomainOutByLabelMove},
	{"update pools/status", "a pool with a topology and `spec.health.domainOutPercent: 50`: entries for a rack of 4: 2 `Quarantined` with a signal's reason, the rack's `domain` and `domainSize`, 2 `DomainOut`; then the reasons of the 2 honoured entries rewritten to `DeviceUnhealthy`", "the rack never goes out (no `DomainHeldOut` taint): an entry no signal backs is honoured only as an `Unbacked` quarantine within the breaker, which counts toward no domain and stays `Unbacked` while no signal shows; `DomainOut` entries are recomputed from the domain's faults each pass; all return after their re-checks", "41", attackDomainOutByStatus},
	{"edit in a namespace", "a real DaemonSet without devices, tolerating every taint, made for an exclusive member and a node of a pool that is not exclusive", "no pod of it on the exclusive member (P6: node agents come only from kube-system, litepool's namespace and the webhook's `--agent-namespace` list); its pod runs on the other node", "38.1", attackTenantDaemonSet},
	{"create pods in a namespace trusted with node agents (kube-system, litepool's, the webhook's `--agent-namespace`: `gpu-operator`, `monitoring` as shipped)", "a real DaemonSet without devices, tolerating every taint", "its pods run on every exclusive member: whoever may write pods there is trusted on every exclusive node (grant it as cluster-admin is granted; `--agent-namespace` refuses `default`)", "38.1", attackTrustedNamespaceDaemonSet},
	{"edit in a namespace", "pod without the pool label, pinned to a namespace-restricted pool that is not exclusive by required node affinity: `runwhere.ai/pool In [P, no-such-pool]`; two terms of `matchFields metadata.name In` its members; `kubernetes.io/hostname In` its members' hostnames (one unlike its name); `nodeSelector kubernetes.io/hostname` with a `DoesNotExist` term; from a namespace the pool does not admit", "each refused (P4, by `pods-node-selector.runwhere.ai`: a placement that only one pool's members satisfy makes the pod that pool's, and the message names the pin); no pod on the pool's nodes", "38.2", attackPinnedByAffinity},
	{"edit in a namespace", "the same pods labelled `runwhere.ai/pool: default`", "each refused (P4 and P1, by `pods-pinned-default-label.runwhere.ai`: judged as the pool's pod; the `default` label is not overwritten); no pod on the pool's nodes", "38.2", attackPinnedDefaultLabel},
	{"patch nodes", "during a rollout by domain (`maxUnavailableDomains: 1`, `minNodes` 4 of 3 super nodes × 2), rewrite `huawei.com/topotree.superpodid` to put every member in one super node, then each member in a super node of its own", "admitted (topology labels are their agents'); the rollout keeps the domains it fixed at its start (`status.nodes[].domain`): never more than one of them out at once, never fewer than `minNodes` available, and it succeeds with its 3 domains", "41", attackRelabelDomainsMidRollout},
	{"update pools/status", "during the same rollout by domain, rewrite the pool's status: 60 nodes, all healthy, 30 domains", "nothing follows from it: the rollout reads its floor from `spec.minNodes` and its domains from its own status; never more than one super node out, never fewer than `minNodes` available, and it succeeds", "41", attackRewritePoolStatusMidRollout},
	{"update workloads/status (Kueue) in a namespace", "before a rollout by domain (`maxUnavailableDomains: 1`, `minNodes` 4 of 3 super nodes × 2), forge a pending Workload's `status.admission` (a TAS assignment) onto the members of the idle super node that would go first, and clear the admission another Workload has on a super node that runs a pod", "**residual**: the forged claim only reorders: the rollout counts the nodes of an admitted Workload's assignment as busy before its pods are there (`pkg/upgrade` KueueAdmissions), so the named super node goes after the idle one, as a busy one does, and waits no longer (no step waits on a Workload). The cleared one changes nothing while its pods run (busy is read from the pods); a gang admitted and not started yet loses that protection (its super node may go first), which the right gives anyway: Kueue stops the Job of a Workload whose status says `Evicted`. Never more than one super node out, never fewer than `minNodes` available, and the rollout succeeds", "41", attackWorkloadStatusMidRollout},
	{"create jobs (batch) in a namespace", "a Job marked as Kueue's (label `kueue.x-k8s.io/queue-name`, which `jobs.runwhere.ai` selects on) whose template asks for an exclusive pool that does not admit the namespace: by the label `runwhere.ai/pool`, then by `nodeSelector runwhere.ai/pool` alone", "the Job is admitted unchanged, with the refusal its pods will meet as a warning (`[P4]`): no toleration and no nodeSelector written into its template (the entry judges the template with the pod rules, P4 included, and writes only what P1 would give the pods); each of its pods is refused at creation (P4, the Job's `FailedCreate` event); no pod of the namespace on the pool's nodes", "41", attackJobTemplateToleration},
	{"create jobs.batch.volcano.sh and podgroups.scheduling.volcano.sh in a namespace", "a Volcano Job and a PodGroup naming the Volcano Queue of a pool that does not admit the namespace (`spec.queue`)", "each refused (P4, by `volcano-queues.runwhere.ai`); neither is made", "42", attackVolcanoQueueFromOtherNamespace},
	{"create queues.scheduling.volcano.sh", "a Queue named after a pool before the pool feeds Volcano, labelled `runwhere.ai/pool` with it", "the Pool feeding Volcano is refused (R1, `metadata.name`); the Queue is left as it was: a label is a claim, and litepool writes only Queues with its Pool's controller ownerReference", "42", attackVolcanoQueueNameTaken},
	{"create driverrollouts and stressruns (`litepool-operator`)", "`kubectl litepool restore` of a saved DriverRollout and StressRun whose status says Succeeded with made-up results (a rollout or run that would never be carried out, a history that never happened)", "refused before anything is created: restore must read the controller's Lease and write status, and neither is the role's (status is the controller's); nothing is created", "39", attackOperatorRestoresForgedStatus},
	{"create stressruns (`litepool-operator`)", "a run asking for node work to pull with a Secret of its choosing: `spec.imagePullSecrets` (no such field) and an annotation", "every pod of node work (remediation Jobs, re-check and stress pods, this run's) pulls with exactly the controller's `--node-work-image-pull-secret`, which only the operator sets: no Pool, DriverRollout or StressRun field names one", "39", attackNodeWorkPullSecret},
	{"the webhook's and the controller's ServiceAccounts", "open the break-glass themselves: `failurePolicy: Ignore` on `node-departures.runwhere.ai` (an update by the webhook's identity, the runbook's JSON patch by the controller's)", "refused (`litepool-webhook-config-guard`); the entry stays Fail. Only a cluster administrator opens the glass (docs/runbook.md); `TestBreakGlass` (test/e2e/webhook) plays the outage, the open glass, the restore and N3 refusing again", "39", attackLitepoolOpensTheGlass},
	{"the controller's ServiceAccount (litepool-controller)", "patch the validating configuration's `cert-manager.io/` annotations: `inject-ca-from` or `inject-ca-from-secret` naming a tenant's Certificate or Secret, `inject-apiserver-ca`", "refused (`litepool-webhook-config-guard` keeps the annotations that tell cert-manager's CA injector where to read the CA as applied; before issue 39 it did not look at them)", "39", attackControllerRedirectsTheInjector},
	{"the controller's ServiceAccount (litepool-controller)", "update or JSON-patch the validating configuration's CA bundles (a second CA beside litepool's)", "refused: the update by RBAC (patch only), the patch by `litepool-webhook-config-guard` (the controller writes no CA bundle; before issue 39 the guard held it to caBundle like the webhook, which let it add a CA of its choosing)", "39", attackControllerWritesCABundle},
	{"the webhook's ServiceAccount (litepool-webhook), with `components/cert-manager`", "read or update its webhook configurations, read or update its certificate Secret", "forbidden (RBAC: the component removes both rules); the webhook, run with exactly the rights left, serves and admits a pool pod (`--cert-mode=files` writes no CA bundle)", "39", playedIn("certmanager", "TestWebhookHoldsNoCertificateRights")},
	{"cert-manager's CA injector's ServiceAccount (`cert-manager/cert-manager-cainjector`: update and patch every webhook configuration), with `components/cert-manager`", "update litepool's configurations: `failurePolicy`, `clientConfig`, rules; patch their `cert-manager.io/` annotations to a tenant's Certificate or Secret", "refused (`litepool-webhook-config-guard`, which the component extends to the injector); a CA bundle is accepted, and the running injector, under that identity, writes litepool's CA", "39", playedIn("certmanager", "TestCAInjectorHeldToCABundle")},
	{"create cert-manager Issuers and Certificates in a namespace", "a CA of their own and, from it, Certificates named `litepool-ca` and `litepool-webhook-cert` for litepool's Service names, one annotated `cert-manager.io/inject-ca-from: litepool-system/litepool-ca`; then point litepool's configurations at theirs", "litepool's CA bundles hold litepool's CA alone after the CA injector has reconciled them: it reads only what the configurations' own annotation names, in litepool's namespace (an annotation on a Certificate orders nothing); the configurations are not the tenant's to patch (RBAC). **Residual**: the same rights in litepool's namespace choose the CA (security.md, Hardening 7)", "39", playedIn("certmanager", "TestTenantCertificatesChooseNoCA")},
	{"create and update Secrets in a namespace", "Secrets named `litepool-ca` and `litepool-webhook-cert` with a CA, key and certificate of their own for litepool's Service names, annotated `cert-manager.io/certificate-name` and `cert-manager.io/allow-direct-injection: \"true\"`", "litepool's CA bundles hold litepool's CA alone after the CA injector has reconciled them (it reads the Secret of the Certificate the configurations name, in litepool's namespace); litepool's pods mount `litepool-webhook-cert` of their own namespace (a Secret volume cannot name another; kwok mounts none, so this part is not played)", "39", playedIn("certmanager", "TestTenantSecretsChooseNoCA")},
}

func TestAttackMatrix(t *testing.T) {
	setupFixture(t)
	for _, r := range matrix {
		t.Run(r.right+": "+r.attack, r.run)
	}
}

// markdown is the row as docs/security.md prints it.
func (r row) markdown() string {
	item := r.item
	if item == "" {
		item = "-"
	}
	return fmt.Sprintf("| %s | %s | %s | %s |", r.right, r.attack, r.holds, item)
}

// TestMatrixIsDocumented: docs/security.md prints every row of the matrix as it is.
func TestMatrixIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(framework.Root, "docs", "security.md"))
	if !assert.NoError(t, err) {
		return
	}
	for _, r := range matrix {
		assert.True(t, strings.Contains(string(doc), r.markdown()+"\n"), "docs/security.md lacks the row:\n%s", r.markdown())
	}
	played := map[string]bool{}
	for _, r := range matrix {
		played[r.markdown()] = true
	}
	for _, line := range documentedRows(string(doc)) {
		assert.True(t, played[line], "docs/security.md's matrix has a row no test plays:\n%s", line)
	}
}

// documentedRows are the rows of the matrix's table in the doc: the lines after its
// header and separator, up to the first line that is not a table row.
func documentedRows(doc string) []string {
	const header = "| Right | Worst write | What holds | Found in |"
	_, after, found := strings.Cut(doc, header+"\n")
	if !found {
		return nil
	}
	var rows []string
	for i, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i > 0 { // the separator
			rows = append(rows, line)
		}
	}
	return rows
}
