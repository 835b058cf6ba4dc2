package policy

import (
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// ImageApproved says whether image is among the operator's approved images: each entry
// names a registry with a trailing slash (registry.example.com/: all of its images), a
// repository (hd.example/approved), which approves that repository and those
// below it at a path boundary (hd.example/approved/x:1, hd.example/approved@sha256:...),
// never a look-alike that merely starts with the same characters
// (hd.example/approved-evil/miner:1); or a full reference with a tag or digest, which
// approves exactly that image. Names are compared as the container runtime resolves
// them (busybox is index.docker.io/library/busybox). An image that does not parse is not
// approved.
func ImageApproved(image string, approved []string) bool {
	ref, err := name.ParseReference(image)
	if err != nil {
		return false
	}
	repo := ref.Context().Name()
	for _, entry := range approved {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if exact, err := name.ParseReference(entry); err == nil && hasVersion(entry) {
			if exact.Name() == ref.Name() {
				return true
			}
			continue
		}
		trimmed := strings.TrimSuffix(entry, "/")
		if strings.HasSuffix(entry, "/") && !strings.Contains(trimmed, "/") {
			// "registry.example.com/": every image of that registry.
			if reg, err := name.NewRegistry(trimmed); err == nil && reg.Name() == ref.Context().RegistryStr() {
				return true
			}
			continue
		}
		r, err := name.NewRepository(trimmed)
		if err != nil {
			continue
		}
		if repo == r.Name() || strings.HasPrefix(repo, r.Name()+"/") {
			return true
		}
	}
	return false
}

// hasVersion says whether a reference names a tag or a digest (after the last path
// element), not only a repository.
func hasVersion(ref string) bool {
	last := ref[strings.LastIndex(ref, "/")+1:]
	return strings.ContainsAny(last, ":@")
}
