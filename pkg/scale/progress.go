package scale

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// upProgress is what a running scale-up has done, for the message of a second Ctrl-C
// (which skips putting the joined nodes back).
type upProgress struct {
	mu    sync.Mutex
	pool  string
	nodes []string
}

func (p *upProgress) joined(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nodes = append(p.nodes, name)
}

func (p *upProgress) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.nodes) == 0 {
		return fmt.Sprintf("scale-up of pool %s: no node had joined yet", p.pool)
	}
	return fmt.Sprintf("scale-up of pool %s stopped half-way: node(s) %s joined.\nFinish it (with --add, leave out the nodes that joined):\n  %s\nOr put them back in the default pool:\n  kubectl litepool scale %s --remove %s --yes",
		p.pool, strings.Join(p.nodes, ", "), interrupt.CommandLine(), p.pool, strings.Join(p.nodes, ","))
}

// downProgress is what a running scale-down has changed, for the message of a second
// Ctrl-C (which skips the put-back).
type downProgress struct {
	mu          sync.Mutex
	pool        string
	nodes       []string
	wasCordoned []string
	left        bool
}

func (p *downProgress) touched(name string, wasCordoned bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nodes = append(p.nodes, name)
	if wasCordoned {
		p.wasCordoned = append(p.wasCordoned, name)
	}
}

func (p *downProgress) leaving() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left = true
}

func (p *downProgress) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.nodes) == 0 {
		return fmt.Sprintf("scale-down of pool %s: nothing was changed yet", p.pool)
	}
	nodes := strings.Join(p.nodes, " ")
	msg := fmt.Sprintf("scale-down of pool %s left node(s) %s cordoned and marked %s=%s", p.pool, strings.Join(p.nodes, ", "), policy.AnnotationScaleDown, p.pool)
	if p.left {
		msg += "; some may have left the pool already"
	}
	msg += fmt.Sprintf(".\nResume it (it picks the marked nodes first):\n  %s\n", interrupt.CommandLine())
	var uncordon []string
	for _, n := range p.nodes {
		if !slices.Contains(p.wasCordoned, n) {
			uncordon = append(uncordon, n)
		}
	}
	msg += fmt.Sprintf("Or put them back:\n  kubectl annotate node %s %s- %s- %s-", nodes, policy.AnnotationScaleDown, policy.AnnotationDraining, policy.CordonScaleDown.Annotation())
	if len(uncordon) > 0 {
		msg += "\n  kubectl uncordon " + strings.Join(uncordon, " ")
	}
	return msg
}

// dedupe drops repeated names, keeping the first of each in order.
func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
