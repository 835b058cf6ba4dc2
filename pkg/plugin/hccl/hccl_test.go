package hccl

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
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

func npuPool(r v1alpha1.OpRetrySpec) *v1alpha1.Pool {
	return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-snt9b", UID: "pool-uid"},
		Spec: v1alpha1.PoolSpec{HCCL: v1alpha1.HCCLSpec{OpRetry: r}}}
}

var on3 = v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 3, RetryTimeoutSeconds: 300}

func opRetry(t *testing.T, f *kittest.Factory) v1alpha1.OpRetrySpec {
	t.Helper()
	return f.Pool(t, "train-snt9b").Spec.HCCL.OpRetry
}

func TestHCCLSet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		out    string
		stored v1alpha1.OpRetrySpec
		events []string
	}{
		{"sets the flags given; unset numbers take the defaults", []string{"--op-retry=true", "--max-retries", "5"},
			"pool/train-snt9b hccl operator retry: on, max retries 5, retry timeout 300s\n",
			v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 5, RetryTimeoutSeconds: 300},
			[]string{"HCCLOpRetry: HCCL operator retry on, max retries 5, retry timeout 300s"}},
		{"turning it off keeps the numbers", []string{"--op-retry=false"},
			"pool/train-snt9b hccl operator retry: off, max retries 3, retry timeout 300s\n",
			v1alpha1.OpRetrySpec{MaxRetries: 3, RetryTimeoutSeconds: 300},
			[]string{"HCCLOpRetry: HCCL operator retry off, max retries 3, retry timeout 300s"}},
		{"client dry run", []string{"--max-retries", "5", "--dry-run=client"},
			"pool/train-snt9b hccl operator retry: on, max retries 5, retry timeout 300s (dry run)\n", on3, nil},
		{"server dry run", []string{"--max-retries", "5", "--dry-run=server"},
			"pool/train-snt9b hccl operator retry: on, max retries 5, retry timeout 300s (server dry run)\n", on3, nil},
		{"-o name", []string{"--retry-timeout", "60s", "-o", "name"}, "pool.runwhere.ai/train-snt9b\n",
			v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 3, RetryTimeoutSeconds: 60},
			[]string{"HCCLOpRetry: HCCL operator retry on, max retries 3, retry timeout 60s"}},
		{"-o jsonpath under dry run: the pool as it would be", []string{"--max-retries", "7", "--dry-run=client", "-o", "jsonpath={.spec.hccl.opRetry.maxRetries}"},
			"7", on3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := kittest.NewFactory(t, npuPool(on3))
			r := kittest.Run(f, NewCmdHCCLSet, "", append([]string{"train-snt9b"}, tc.args...)...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
			assert.Equal(t, tc.stored, opRetry(t, f))
			assert.Equal(t, tc.events, f.Events(t))
		})
	}
}

func TestHCCLSetRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"out of range", []string{"train-snt9b", "--max-retries", "11"}, "[R1] hccl max retries 11 out of range: must be 1-10"},
		{"nothing to set", []string{"train-snt9b"}, "nothing to set: give --op-retry, --max-retries or --retry-timeout"},
		{"two pools", []string{"train-snt9b", "other", "--op-retry=true"}, "give exactly one pool: kubectl litepool hccl set POOL [flags]"},
		{"no Pool object", []string{"no-such-pool", "--op-retry=true"},
			`pool "no-such-pool" has no Pool object: HCCL settings live in spec.hccl; create the pool first (kubectl litepool create)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := kittest.NewFactory(t, npuPool(on3))
			r := kittest.Run(f, NewCmdHCCLSet, "", tc.args...)
			require.EqualError(t, r.Err, tc.want)
			assert.Empty(t, r.Out)
			assert.Equal(t, on3, opRetry(t, f))
			assert.Empty(t, f.Events(t))
		})
	}
}

// A write the API server refuses is the command's error: nothing stored, no event. A
// conflict (someone else wrote the pool meanwhile) is retried on the pool as it is now.
func TestHCCLSetWrites(t *testing.T) {
	f := kittest.NewFactory(t, npuPool(on3))
	f.Dynamic.PrependReactor("update", "pools", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
	})
	r := kittest.Run(f, NewCmdHCCLSet, "", "train-snt9b", "--max-retries", "5")
	require.EqualError(t, r.Err, "Internal error occurred: connection lost")
	assert.Empty(t, r.Out)
	assert.Equal(t, on3, opRetry(t, f))
	assert.Empty(t, f.Events(t))

	f = kittest.NewFactory(t, npuPool(on3))
	conflicts := 0
	f.Dynamic.PrependReactor("update", "pools", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts++; conflicts > 1 {
			return false, nil, nil
		}
		// Someone turns retry off between our read and our write (through the tracker:
		// the fake's reactors are not reentrant).
		u, err := poolclient.ToUnstructured(npuPool(v1alpha1.OpRetrySpec{MaxRetries: 3, RetryTimeoutSeconds: 300}))
		require.NoError(t, err)
		require.NoError(t, f.Dynamic.Tracker().Update(v1alpha1.PoolResource, u, ""))
		return true, nil, apierrors.NewConflict(v1alpha1.PoolResource.GroupResource(), "train-snt9b", errors.New("the object has been modified"))
	})
	r = kittest.Run(f, NewCmdHCCLSet, "", "train-snt9b", "--max-retries", "5")
	require.NoError(t, r.Err)
	assert.Equal(t, "pool/train-snt9b hccl operator retry: off, max retries 5, retry timeout 300s\n", r.Out)
	assert.Equal(t, v1alpha1.OpRetrySpec{MaxRetries: 5, RetryTimeoutSeconds: 300}, opRetry(t, f), "the other writer's change is kept")
}

func TestHCCLGet(t *testing.T) {
	off := npuPool(v1alpha1.OpRetrySpec{})
	off.Name = "infer-snt9b"
	f := kittest.NewFactory(t, npuPool(on3), off)
	r := kittest.Run(f, NewCmdHCCLGet, "", "train-snt9b", "infer-snt9b")
	require.NoError(t, r.Err)
	assert.Equal(t, `POOL          OP RETRY   MAX RETRIES   RETRY TIMEOUT   NPU POD ENV
train-snt9b   true       3             300s            HCCL_OP_RETRY_ENABLE=L0:0, L1:1, L2:1 HCCL_OP_RETRY_PARAMS=MaxCnt:3,HoldTime:60000,IntervalTime:1000
infer-snt9b   false      -             -               <none>
`, r.Out)
	r = kittest.Run(f, NewCmdHCCLGet, "", "no-such-pool")
	require.Error(t, r.Err)
	assert.True(t, apierrors.IsNotFound(r.Err), "%v", r.Err)
}
