package policy

import (
	"regexp"
)

// DefaultPool names the nodes that carry no pool label. No Pool object may take it.
const DefaultPool = "default"

var poolNamePattern = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)

// ValidatePoolName checks the pool-name rule (R1): 4-24 characters, lowercase letters,
// digits and hyphens, starting with a letter and not ending with a hyphen; "default" is
// reserved.
func ValidatePoolName(name string) error {
	const accepted = "4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (e.g. train-a100)"
	switch {
	case name == DefaultPool:
		return Violationf("R1", "pool name %q is reserved for nodes that belong to no pool", name)
	case len(name) < 4 || len(name) > 24:
		return Violationf("R1", "invalid pool name %q: it has %d characters; a pool name has %s", name, len(name), accepted)
	case !poolNamePattern.MatchString(name):
		return Violationf("R1", "invalid pool name %q: a pool name has %s", name, accepted)
	}
	return nil
}
