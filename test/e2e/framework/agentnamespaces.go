package framework

import (
	"os"
	"path/filepath"
	"strings"
)

// AgentNamespaceFlags are the webhook's shipped --agent-namespace arguments
// (deploy/webhook/deployment.yaml), so that a local webhook trusts the namespaces
// whose node agents the shipped pod-placement conditions leave out, and no other.
func AgentNamespaceFlags() []string {
	raw, err := os.ReadFile(filepath.Join(Root, "deploy", "webhook", "deployment.yaml"))
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if arg, ok := strings.CutPrefix(strings.TrimSpace(line), "- --agent-namespace="); ok {
			out = append(out, "--agent-namespace="+arg)
		}
	}
	return out
}

// ShippedAgentNamespaces are the namespaces the shipped --agent-namespace lists.
func ShippedAgentNamespaces() []string {
	var out []string
	for _, f := range AgentNamespaceFlags() {
		out = append(out, strings.Split(strings.TrimPrefix(f, "--agent-namespace="), ",")...)
	}
	return out
}
