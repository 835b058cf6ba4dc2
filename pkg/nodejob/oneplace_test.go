package nodejob

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostAccess is what gives a pod the node: privilege, the host's PID or network
// namespace, a path of the host.
var hostAccess = regexp.MustCompile(`\b(Privileged|HostPID|HostNetwork|HostIPC|HostPath)\s*:`)

// This package is the one place litepool's code builds a pod with host access: every
// other builder of node work goes through Spec, where HostAccess asks for it and the
// image's approval is checked.
func TestOnePlaceBuildsAPodWithHostAccess(t *testing.T) {
	var places []string
	for _, root := range []string{"../../pkg", "../../cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if hostAccess.Match(src) {
				places = append(places, filepath.ToSlash(strings.TrimPrefix(path, "../../")))
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"pkg/nodejob/nodejob.go"}, places)
}
