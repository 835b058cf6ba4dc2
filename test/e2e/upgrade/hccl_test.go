package upgrade

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func opRetry(t *testing.T, pool string) v1alpha1.OpRetrySpec {
	t.Helper()
	p, err := poolclient.New(framework.C.Dynamic).Get(context.Background(), pool)
	require.NoError(t, err)
	return p.Spec.HCCL.OpRetry
}

func TestHCCLSetIsStoredShownAndRangeChecked(t *testing.T) {
	t.Parallel()
	framework.AscendPool(t, "hccl-pool", 1, target, software)
	out := framework.C.MustLitepool(t, "hccl", "set", "hccl-pool", "--op-retry=true", "--max-retries", "3", "--retry-timeout", "300s")
	assert.Equal(t, "pool/hccl-pool hccl operator retry: on, max retries 3, retry timeout 300s\n", out)
	want := v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 3, RetryTimeoutSeconds: 300}
	assert.Equal(t, want, opRetry(t, "hccl-pool"))
	assert.Equal(t, `POOL        OP RETRY   MAX RETRIES   RETRY TIMEOUT   NPU POD ENV
hccl-pool   true       3             300s            HCCL_OP_RETRY_ENABLE=L0:0, L1:1, L2:1 HCCL_OP_RETRY_PARAMS=MaxCnt:3,HoldTime:60000,IntervalTime:1000
`, framework.C.MustLitepool(t, "hccl", "get", "hccl-pool"))

	// Out of range, or not whole seconds: refused, nothing changes.
	for msg, args := range map[string][]string{
		"error: [R1] hccl max retries 11 out of range: must be 1-10\n":               {"--max-retries", "11"},
		"error: [R1] hccl max retries 0 out of range: must be 1-10\n":                {"--max-retries", "0"},
		"error: [R1] hccl retry timeout 4000s out of range: must be 1-3600s\n":       {"--retry-timeout", "4000s"},
		"error: [R1] hccl retry timeout 1.5s: must be a whole number of seconds\n":   {"--retry-timeout", "1.5s"},
		"error: nothing to set: give --op-retry, --max-retries or --retry-timeout\n": {},
	} {
		r := framework.C.Litepool(t, append([]string{"hccl", "set", "hccl-pool"}, args...)...)
		assert.Equal(t, 1, r.ExitCode, args)
		assert.Equal(t, msg, r.Stderr, args)
		assert.Equal(t, want, opRetry(t, "hccl-pool"), args)
	}

	// Dry runs change nothing.
	out = framework.C.MustLitepool(t, "hccl", "set", "hccl-pool", "--max-retries", "5", "--dry-run=server")
	assert.Equal(t, "pool/hccl-pool hccl operator retry: on, max retries 5, retry timeout 300s (server dry run)\n", out)
	assert.Equal(t, want, opRetry(t, "hccl-pool"))

	// Turning it off keeps the numbers and drops the environment.
	framework.C.MustLitepool(t, "hccl", "set", "hccl-pool", "--op-retry=false")
	assert.Equal(t, v1alpha1.OpRetrySpec{MaxRetries: 3, RetryTimeoutSeconds: 300}, opRetry(t, "hccl-pool"))
	assert.Contains(t, framework.C.MustLitepool(t, "hccl", "get", "hccl-pool"), "hccl-pool   false      3             300s            <none>\n")

	r := framework.C.Litepool(t, "hccl", "set", "no-such-pool", "--op-retry=true")
	assert.Equal(t, "error: pool \"no-such-pool\" has no Pool object: HCCL settings live in spec.hccl; create the pool first (kubectl litepool create)\n", r.Stderr)
}
