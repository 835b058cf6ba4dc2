// Package policy holds every litepool rule and the model it is stated in: label keys,
// pool names, pool and workload types, accelerator accounting, node and pool status,
// scale-down safety, admission rules and the upgrade state machine. (The version-chain
// compatibility checks, rule C1, live with their matrix in pkg/compat.)
//
// Everything here is a pure function over API objects: no client, no I/O. The plugin
// calls these functions before it changes anything and the webhook calls the same ones
// at admission, so a rule is written once. Each rule's error names its rule id (see
// the table in docs/rules.md) so that a denial says which rule fired.
package policy
