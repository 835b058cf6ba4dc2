package compat

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseAndCompareVersions(t *testing.T) {
	for _, bad := range []string{"", "abc", "535.x", "1..2", "v1.2", "535.104.05-beta"} {
		_, ok := parseVersion(bad)
		assert.False(t, ok, bad)
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"535.104.05", "535.104.5", 0},
		{"535.104.05", "535.129.03", -1},
		{"550.54.14", "535.129.03", 1},
		{"12", "12.0", 0},
		{"12.4", "12", 1},
		{"11.8", "12.1", -1},
		{"1.2.3", "not a version", 1}, // what does not parse counts as 0
	} {
		assert.Equal(t, tc.want, compareVersionStrings(tc.a, tc.b), "%s vs %s", tc.a, tc.b)
		assert.Equal(t, -tc.want, compareVersionStrings(tc.b, tc.a), "%s vs %s", tc.b, tc.a)
	}
	v, ok := parseVersion(" 535.104.05 ")
	if assert.True(t, ok) {
		assert.Equal(t, []uint{535, 104, 5}, v.Components())
	}
}
