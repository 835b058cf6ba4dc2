package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateLabelKey(t *testing.T) {
	tests := []struct {
		key     string
		wantErr string
	}{
		{key: "runwhere.ai/pool"},
		{key: "runwhere.ai/gpu-type"},
		{key: "nvidia.com/gpu.product"},
		{key: "team"},
		{key: "runwhere.ai/pol", wantErr: `[N1] unknown label key "runwhere.ai/pol": keys under "runwhere.ai/" must be one of runwhere.ai/driver-version, runwhere.ai/gpu-type, runwhere.ai/gpuType, runwhere.ai/health, runwhere.ai/job-type, runwhere.ai/namespace, runwhere.ai/node-pool, runwhere.ai/pool, runwhere.ai/port, runwhere.ai/priority, runwhere.ai/quota, runwhere.ai/workload-type`},
		{key: "pool", wantErr: `[N1] label key "pool" looks like litepool's "runwhere.ai/pool": use "runwhere.ai/pool"`},
		{key: "gpu-type", wantErr: `[N1] label key "gpu-type" looks like litepool's "runwhere.ai/gpu-type": use "runwhere.ai/gpu-type"`},
		{key: "runwhere.ai.pool", wantErr: `[N1] label key "runwhere.ai.pool" looks like litepool's "runwhere.ai/pool": use "runwhere.ai/pool"`},
		{key: "runwhere/pool", wantErr: `[N1] label key "runwhere/pool" looks like litepool's "runwhere.ai/pool": use "runwhere.ai/pool"`},
		{key: "RUNWHERE.AI/pool", wantErr: `[N1] label key "RUNWHERE.AI/pool" looks like litepool's "runwhere.ai/pool": use "runwhere.ai/pool"`},
		{key: "runwhere.ai/upgrade-state", wantErr: `[N1] "runwhere.ai/upgrade-state" is an annotation key, not a label key`},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			err := ValidateLabelKey(tt.key)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestValidateLabelValues(t *testing.T) {
	assert.NoError(t, ValidateLabel(LabelPool, "train-a100"))
	assert.EqualError(t, ValidateLabel(LabelPool, "Train"),
		`[N1] invalid value "Train" for label "runwhere.ai/pool": invalid pool name "Train": a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)`)
	assert.EqualError(t, ValidateLabel(LabelHealth, "sick"), `[N1] invalid value "sick" for label "runwhere.ai/health": must be one of healthy, degraded`)
	assert.EqualError(t, ValidateLabel(LabelWorkloadType, "batch"),
		`[N1] invalid value "batch" for label "runwhere.ai/workload-type": unknown workload type "batch": must be one of training, inference, development, compute`)
}

func TestUserLabelKeyNeverAddsOrDoublesThePrefix(t *testing.T) {
	k, err := UserLabelKey("runwhere.ai/pool")
	assert.NoError(t, err)
	assert.Equal(t, "runwhere.ai/pool", k)

	_, err = UserLabelKey("pool")
	assert.EqualError(t, err, `[N1] label key "pool" has no "runwhere.ai/" prefix: did you mean "runwhere.ai/pool"?`)

	_, err = UserLabelKey("runwhere.ai/runwhere.ai/pool")
	assert.EqualError(t, err, `[N1] unknown label key "runwhere.ai/runwhere.ai/pool": keys under "runwhere.ai/" must be one of runwhere.ai/driver-version, runwhere.ai/gpu-type, runwhere.ai/gpuType, runwhere.ai/health, runwhere.ai/job-type, runwhere.ai/namespace, runwhere.ai/node-pool, runwhere.ai/pool, runwhere.ai/port, runwhere.ai/priority, runwhere.ai/quota, runwhere.ai/workload-type`)

	_, err = UserLabelKey("team")
	assert.EqualError(t, err, `[N1] label key "team" is not a litepool key: litepool manages only keys under "runwhere.ai/" (runwhere.ai/driver-version, runwhere.ai/gpu-type, runwhere.ai/gpuType, runwhere.ai/health, runwhere.ai/job-type, runwhere.ai/namespace, runwhere.ai/node-pool, runwhere.ai/pool, runwhere.ai/port, runwhere.ai/priority, runwhere.ai/quota, runwhere.ai/workload-type)`)
}

func TestValidatePoolName(t *testing.T) {
	for _, ok := range []string{"train-a100", "abcd", "a23456789012345678901234"} {
		assert.NoError(t, ValidatePoolName(ok), ok)
	}
	bad := map[string]string{
		"default":   `[R1] pool name "default" is reserved for nodes that belong to no pool`,
		"abc":       `[R1] invalid pool name "abc": it has 3 characters; a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)`,
		"1pool":     `[R1] invalid pool name "1pool": a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)`,
		"pool-":     `[R1] invalid pool name "pool-": a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)`,
		"Pool_A100": `[R1] invalid pool name "Pool_A100": a pool name has 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)`,
	}
	for name, want := range bad {
		assert.EqualError(t, ValidatePoolName(name), want, name)
	}
}

func TestRegistryKnowsGpuctlKeys(t *testing.T) {
	for key, value := range map[string]string{
		"runwhere.ai/job-type": "notebook", "runwhere.ai/priority": "medium", "runwhere.ai/namespace": "true",
		"runwhere.ai/port": "8000", "runwhere.ai/gpuType": "A100-80G", "runwhere.ai/quota": "team-quota",
	} {
		assert.NoError(t, ValidateLabel(key, value), key)
	}
	_, isKey := Registry["runwhere.ai/description"]
	assert.True(t, isKey)
	assert.EqualError(t, ValidateLabel("runwhere.ai/job-type", "batch"),
		`[N1] invalid value "batch" for label "runwhere.ai/job-type": unknown job type "batch": must be one of compute, inference, notebook, training`)
	assert.EqualError(t, ValidateLabel("runwhere.ai/port", "http"),
		`[N1] invalid value "http" for label "runwhere.ai/port": must be a port number, 1-65535`)
}

func TestInternalKeysAreRefusedOnNodesAndPods(t *testing.T) {
	err := ValidateLabelKey(LabelDeparturesOf)
	require.Error(t, err)
	assert.EqualError(t, err, `[N1] "runwhere.ai/departures-of" is kept by litepool on its own objects (on litepool's departure ConfigMaps: the pool whose departures they reserve), not set on nodes or pods`)
	assert.NotContains(t, LabelKeys(), LabelDeparturesOf)
}
