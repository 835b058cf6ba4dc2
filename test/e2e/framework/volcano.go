package framework

import (
	"context"
	"fmt"
	"path/filepath"
)

// VolcanoCRDDir holds Volcano's CRDs as hack/build-volcano-crds.sh makes them
// (controller-gen over the volcano.sh/apis hack/tools-volcano pins; make volcano-crds).
var VolcanoCRDDir = filepath.Join(Root, "_output", "volcano-crds")

// InstallVolcanoCRDs installs Volcano's Queue, PodGroup, Job and HyperNode CRDs into c,
// so that the API server validates every Volcano object litepool writes. No Volcano
// scheduler or controller runs: the tests check what litepool writes and refuses.
func InstallVolcanoCRDs(ctx context.Context, c *Cluster) error {
	files, err := filepath.Glob(filepath.Join(VolcanoCRDDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no Volcano CRDs under %s (run make volcano-crds): %v", VolcanoCRDDir, err)
	}
	return InstallCRDFiles(ctx, c, files)
}
