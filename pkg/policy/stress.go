package policy

import (
	"slices"
	"strings"
)

// StressTests are the known stress tests. The StressRun CRD holds the same list as an
// enum (v1alpha1.StressTest), so the API server refuses any other name too.
var StressTests = []string{"npu", "hccs", "roce", "storage"}

// CheckStressTests is rule T1: a run names at least one test, and only known ones.
func CheckStressTests(tests []string) error {
	if len(tests) == 0 {
		return Violationf("T1", "no stress tests given: choose from %s", strings.Join(StressTests, ", "))
	}
	for _, t := range tests {
		if !slices.Contains(StressTests, t) {
			return Violationf("T1", "unknown stress test %q: choose from %s", t, strings.Join(StressTests, ", "))
		}
	}
	return nil
}
