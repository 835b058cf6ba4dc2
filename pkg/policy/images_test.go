package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestImageApproved(t *testing.T) {
	approved := []string{"litepool.local/", "hd.example/approved", "registry.example:5000/tools/", "busybox", "hd.example/pinned/check@sha256:" + digest, "hd.example/tagged/check:1.2"}
	for _, tc := range []struct {
		image string
		ok    bool
	}{
		{"hd.example/approved:1", true},
		{"hd.example/approved/remediate:2", true},
		{"hd.example/approved/remediate@sha256:" + digest, true},
		{"hd.example/approved-evil/miner:1", false}, // issue 28: a plain string prefix approved this
		{"hd.example/approvedx:1", false},
		{"registry.example:5000/tools/reset:3", true},
		{"registry.example:5000/toolsmith:3", false},
		{"busybox:1.36", true},
		{"docker.io/library/busybox@sha256:" + digest, true},
		{"evil.example/busybox:1", false},
		{"hd.example/pinned/check@sha256:" + digest, true},
		{"hd.example/pinned/check:latest", false},
		{"hd.example/tagged/check:1.2", true},
		{"hd.example/tagged/check:1.3", false},
		{"Not A Reference", false},
		{"litepool.local/stress:fail", true},
		{"litepool.local/deep/path/x@sha256:" + digest, true},
		{"litepool.localhost/stress:fail", false},
		{"evil.example/litepool.local/x:1", false},
	} {
		assert.Equal(t, tc.ok, ImageApproved(tc.image, approved), tc.image)
	}
	assert.False(t, ImageApproved("hd.example/approved:1", nil), "nothing approved, nothing runs")
}

const digest = "4b2a6b1c8f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e"
