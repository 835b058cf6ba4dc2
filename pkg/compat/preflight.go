package compat

import (
	"sort"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// DriverPreflight is rule C1 for a driver upgrade: the target version, with the pool's
// declared software, checked against the matrix once for each accelerator model the
// upgrade reaches. The model is the pool's declared one (spec.accelerator.type) where it
// declares one, else each node's own; nodes of no known model give one check with the
// hardware unknown. pool is nil for a pool made of labels, or nodes outside any pool.
// The plugin (upgrade driver) and the webhook (a DriverRollout created by any client)
// both call it.
func DriverPreflight(m *Matrix, pool *v1alpha1.Pool, nodeModels []string, version string) []Result {
	var declared v1alpha1.SoftwareSpec
	models := map[string]bool{}
	if pool != nil {
		declared = pool.Spec.Software
		if hw := pool.Spec.Accelerator.Type; hw != "" && len(nodeModels) > 0 {
			models[hw] = true
		}
	}
	if len(models) == 0 {
		for _, model := range nodeModels {
			if model != "" {
				models[model] = true
			}
		}
	}
	if len(models) == 0 {
		models[""] = true
	}
	sorted := make([]string, 0, len(models))
	for model := range models {
		sorted = append(sorted, model)
	}
	sort.Strings(sorted)
	results := make([]Result, 0, len(sorted))
	for _, model := range sorted {
		chain := Chain{Hardware: model, SoftwareSpec: declared}
		chain.Driver = version
		results = append(results, Check(m, chain))
	}
	return results
}

// FirstErr is the [C1] error of the first result that is not compatible, or nil.
func FirstErr(results []Result) error {
	for _, r := range results {
		if err := r.Err(); err != nil {
			return err
		}
	}
	return nil
}
