package policy

import (
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// HCCL operator-retry ranges (Ascend docs: MaxCnt 1-10; times in ms 0-60000 for the
// hold and interval; the overall retry timeout is litepool's own, in seconds).
const (
	HCCLMinRetries        = 1
	HCCLMaxRetries        = 10
	HCCLDefaultRetries    = 3
	HCCLMinTimeoutSeconds = 1
	HCCLMaxTimeoutSeconds = 3600
	HCCLDefaultTimeout    = 300
)

// ValidateHCCL checks HCCL operator-retry settings (R1).
func ValidateHCCL(r v1alpha1.OpRetrySpec) error {
	if r.MaxRetries != 0 && (r.MaxRetries < HCCLMinRetries || r.MaxRetries > HCCLMaxRetries) {
		return Violationf("R1", "hccl max retries %d out of range: must be %d-%d", r.MaxRetries, HCCLMinRetries, HCCLMaxRetries)
	}
	if r.RetryTimeoutSeconds != 0 && (r.RetryTimeoutSeconds < HCCLMinTimeoutSeconds || r.RetryTimeoutSeconds > HCCLMaxTimeoutSeconds) {
		return Violationf("R1", "hccl retry timeout %ds out of range: must be %d-%ds", r.RetryTimeoutSeconds, HCCLMinTimeoutSeconds, HCCLMaxTimeoutSeconds)
	}
	return nil
}

// ValidatePool is rule R1 on create (old nil) and update: the name rule, the type enum,
// minNodes at least 1, valid workload types and HCCL ranges, and an accelerator type that
// does not change while the pool has member nodes.
func ValidatePool(pool, old *v1alpha1.Pool, members int) error {
	var errs []error
	if old == nil {
		errs = append(errs, ValidatePoolName(pool.Name))
	}
	errs = append(errs, ValidatePoolType(pool.Spec.Type))
	if pool.Spec.MinNodes < 0 { // 0 is unset: the CRD defaults it to 1
		errs = append(errs, Violationf("R1", "minNodes %d: must be at least 1", pool.Spec.MinNodes))
	}
	for _, w := range pool.Spec.AllowedWorkloads {
		if err := ValidateWorkloadType(string(w)); err != nil {
			errs = append(errs, Violationf("R1", "allowedWorkloads: %w", err))
		}
	}
	errs = append(errs, ValidateHCCL(pool.Spec.HCCL.OpRetry), CheckDomainOutPercent(pool))
	if old != nil && members > 0 && old.Spec.Accelerator.Type != pool.Spec.Accelerator.Type {
		errs = append(errs, Violationf("R1", "accelerator type of pool %q cannot change from %q to %q while it has %d node(s); remove its nodes first",
			pool.Name, old.Spec.Accelerator.Type, pool.Spec.Accelerator.Type, members))
	}
	return errors.Join(errs...)
}

// HCCL environment variables injected into NPU pods of a pool with operator retry on (P1).
const (
	EnvHCCLOpRetryEnable = "HCCL_OP_RETRY_ENABLE"
	EnvHCCLOpRetryParams = "HCCL_OP_RETRY_PARAMS"
)

// HCCLEnv returns the environment an NPU pod of the pool gets, or nil when the pool's
// operator retry is off. Retries are allowed on the server (L1) and super-pod (L2)
// levels, not inside a server (L0). The hold time spreads the retry timeout over the
// retries, capped at HCCL's 60000 ms.
func HCCLEnv(spec v1alpha1.PoolSpec) []corev1.EnvVar {
	r := spec.HCCL.OpRetry
	if !r.Enabled {
		return nil
	}
	retries, timeout := int64(r.MaxRetries), int64(r.RetryTimeoutSeconds)
	if retries == 0 {
		retries = HCCLDefaultRetries
	}
	if timeout == 0 {
		timeout = HCCLDefaultTimeout
	}
	hold := min(timeout*1000/retries, 60000)
	return []corev1.EnvVar{
		{Name: EnvHCCLOpRetryEnable, Value: "L0:0, L1:1, L2:1"},
		{Name: EnvHCCLOpRetryParams, Value: fmt.Sprintf("MaxCnt:%d,HoldTime:%d,IntervalTime:1000", retries, hold)},
	}
}

// CheckAdoption is rule R1 on create: a new Pool adopts the nodes already labelled with
// its name (a pool of labels only, as gpuctl makes them), so each of them must match its
// accelerator type, as N2 requires of a node that joins. members are those nodes.
func CheckAdoption(pool *v1alpha1.Pool, members []*corev1.Node) error {
	var mismatched []string
	for _, n := range members {
		if CheckJoin(pool, n) != nil {
			got := GPUType(n)
			if got == "" {
				got = "none"
			}
			mismatched = append(mismatched, fmt.Sprintf("%s (gpu-type %s)", n.Name, got))
		}
	}
	if len(mismatched) == 0 {
		return nil
	}
	sort.Strings(mismatched) // the caller's members come in cache order
	return Violationf("R1", "pool %q with accelerator type %q cannot adopt the %d node(s) labelled %s=%s whose gpu-type differs: %s; set spec.accelerator.type to their gpu-type, or take those nodes out of the pool first",
		pool.Name, pool.Spec.Accelerator.Type, len(mismatched), LabelPool, pool.Name, summarize(mismatched, 3))
}
