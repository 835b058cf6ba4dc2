package plugin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestHCCLSetValidate(t *testing.T) {
	o := func(changed string, retries int32, timeout time.Duration) *HCCLSetOptions {
		return &HCCLSetOptions{MaxRetries: retries, RetryTimeout: timeout, changed: map[string]bool{changed: true}}
	}
	assert.NoError(t, o("max-retries", 10, 300*time.Second).Validate())
	assert.EqualError(t, o("max-retries", 11, 300*time.Second).Validate(), "[R1] hccl max retries 11 out of range: must be 1-10")
	assert.EqualError(t, o("max-retries", 0, 300*time.Second).Validate(), "[R1] hccl max retries 0 out of range: must be 1-10")
	assert.EqualError(t, o("retry-timeout", 3, 0).Validate(), "[R1] hccl retry timeout 0s out of range: must be 1-3600s")
	assert.EqualError(t, o("retry-timeout", 3, 100000*time.Hour).Validate(), "[R1] hccl retry timeout 360000000s out of range: must be 1-3600s")
	assert.EqualError(t, o("retry-timeout", 3, 1500*time.Millisecond).Validate(), "[R1] hccl retry timeout 1.5s: must be a whole number of seconds")
	assert.EqualError(t, o("", 3, time.Second).Validate(), "nothing to set: give --op-retry, --max-retries or --retry-timeout")
}
