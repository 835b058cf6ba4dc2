package admission

import (
	"sort"
	"strconv"
	"strings"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// podPatchOps writes a policy.PodPatch as JSON patch operations against pod as it was
// sent. Building the operations directly (rather than diffing re-encoded JSON) keeps
// the answer exact and cheap: only additions, never a replace or remove.
func podPatchOps(pod *corev1.Pod, p policy.PodPatch) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	ops = addToMap(ops, "/metadata/labels", pod.Labels == nil, p.Labels)
	ops = addToMap(ops, "/spec/nodeSelector", pod.Spec.NodeSelector == nil, p.NodeSelector)
	if len(p.Tolerations) > 0 {
		ops = addToList(ops, "/spec/tolerations", pod.Spec.Tolerations == nil, p.Tolerations)
	}
	for _, ce := range p.Env {
		field, cs := "containers", pod.Spec.Containers
		if ce.Init {
			field, cs = "initContainers", pod.Spec.InitContainers
		}
		path := "/spec/" + field + "/" + strconv.Itoa(ce.Index) + "/env"
		ops = addToList(ops, path, cs[ce.Index].Env == nil, ce.Env)
	}
	return ops
}

func addToMap(ops []jsonpatch.JsonPatchOperation, path string, missing bool, add map[string]string) []jsonpatch.JsonPatchOperation {
	if len(add) == 0 {
		return ops
	}
	if missing {
		return append(ops, jsonpatch.NewOperation("add", path, add))
	}
	keys := make([]string, 0, len(add))
	for k := range add {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/"+escapePointer(k), add[k]))
	}
	return ops
}

func addToList[T any](ops []jsonpatch.JsonPatchOperation, path string, missing bool, add []T) []jsonpatch.JsonPatchOperation {
	if missing {
		return append(ops, jsonpatch.NewOperation("add", path, add))
	}
	for _, v := range add {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/-", v))
	}
	return ops
}

// escapePointer escapes a map key for a JSON pointer (RFC 6901): runwhere.ai/pool
// becomes runwhere.ai~1pool.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
