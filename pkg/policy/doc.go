// Package policy holds every litepool rule and the model it is stated in: label keys,
// pool names, pool and workload types, accelerator accounting, node and pool status,
// scale-down safety, admission rules, the upgrade state machine and stress tests. (The
// version-chain compatibility checks, rule C1, live with their matrix in pkg/compat; a
// failed rollout's resume (U4's second half, `--retry-failed`) is judged in
// pkg/plugin/upgrade, where the flag is.)
//
// Everything here is a pure function over API objects: no client, no I/O. The plugin
// calls these functions before it changes anything and the webhook calls the same ones
// at admission, so a rule is written once. Each rule's error names its rule id (see
// the table in docs/rules.md) so that a denial says which rule fired.
package policy
