package health

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Definition is an operator's remediation or re-check: the image and command a Pool
// names by the definition's name and cannot change. Definitions are given to the
// controller itself (litepool-webhook --health-definition NAME=JSON, in its
// Deployment), which only the operator writes: not a Pool, not an object the
// network-facing webhook's identity may write.
type Definition struct {
	// Image is a reference with a tag or, better, a digest.
	Image   string           `json:"image"`
	Command []string         `json:"command,omitempty"`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// ParseDefinition reads NAME={"image": ..., "command": [...], "timeout": "30m"}.
func ParseDefinition(v string) (string, Definition, error) {
	var d Definition
	key, spec, ok := strings.Cut(v, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return "", d, fmt.Errorf(`health definition %q: want NAME={"image": "...", "command": [...]}`, v)
	}
	dec := json.NewDecoder(strings.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return "", d, fmt.Errorf("health definition %s: %v", key, err)
	}
	if _, err := name.ParseReference(d.Image, name.StrictValidation); err != nil {
		return "", d, fmt.Errorf("health definition %s: image %q: %v (a full reference with a tag or digest)", key, d.Image, err)
	}
	return key, d, nil
}

// ReasonNoDefinition holds out a node whose Pool names no operator definition for its
// remediation or re-check, or one the operator did not define.
const ReasonNoDefinition = policy.ReasonNoDefinition

// definition resolves name among the operator's; the error says what was wrong, which
// rule refused it and what would be accepted.
func (r *Reconciler) definition(what, field, defName, image string, command []string) (Definition, error) {
	if defName == "" {
		given := ""
		if image != "" || len(command) > 0 {
			given = fmt.Sprintf(" (it gives image %q, command %q: a Pool no longer chooses what runs on its nodes)", image, command)
		}
		return Definition{}, fmt.Errorf("the pool's %s names no operator definition%s: set %s.definition to one of %s",
			field, given, field, r.definitionNames())
	}
	d, ok := r.Definitions[defName]
	if !ok {
		return Definition{}, fmt.Errorf("the %s definition %q (%s.definition) is not among the operator's (--health-definition of Deployment litepool-controller): choose one of %s",
			what, defName, field, r.definitionNames())
	}
	return d, nil
}

func (r *Reconciler) definitionNames() string {
	if len(r.Definitions) == 0 {
		return "none (the operator has defined none)"
	}
	var names []string
	for n := range r.Definitions {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (d Definition) timeout(pool *metav1.Duration) time.Duration {
	switch {
	case pool != nil && pool.Duration > 0:
		return pool.Duration
	case d.Timeout != nil && d.Timeout.Duration > 0:
		return d.Timeout.Duration
	}
	return DefaultRemediationTimeout
}
