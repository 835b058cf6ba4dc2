package kit

import (
	"fmt"
	"maps"
	"os/user"
	"slices"
	"strings"
)

// Dedupe drops repeated values, keeping the first of each in order.
func Dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// Summarize lists the first n items and counts the rest.
func Summarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// SortedKeys returns a map's keys, sorted.
func SortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// WhoAmI names the local user, for the records litepool leaves on objects.
func WhoAmI() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown user"
}
