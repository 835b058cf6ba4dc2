package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckStressTests(t *testing.T) {
	assert.NoError(t, CheckStressTests([]string{"npu", "roce"}))
	assert.EqualError(t, CheckStressTests([]string{"npu", "gpu"}), `[T1] unknown stress test "gpu": choose from npu, hccs, roce, storage`)
	assert.EqualError(t, CheckStressTests(nil), "[T1] no stress tests given: choose from npu, hccs, roce, storage")
}
