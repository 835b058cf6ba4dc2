// Package version carries the build's version, set with -ldflags -X at build time.
package version

import "runtime"

// Set by the Makefile: -X github.com/runwhere-ai/litepool/pkg/version.Version=...
var (
	Version = "v0.0.0-dev"
	Commit  = "unknown"
)

// Info is the version as printed by `kubectl litepool version`.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build's version info.
func Get() Info {
	return Info{Version: Version, Commit: Commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}
