package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runwhere-ai/litepool/pkg/nodejob"
)

// addPullSecrets adds the Secrets of one --node-work-image-pull-secret (comma-separated)
// to every node-work pod's imagePullSecrets. A name that is no Secret name is refused at
// start: a kubelet would only say the pull failed, on a node, much later.
func addPullSecrets(v string) error {
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("%q is not a Secret name (%s): give the names of Secrets in litepool's namespace, comma-separated", name, strings.Join(errs, "; "))
		}
		nodejob.PullSecrets = append(nodejob.PullSecrets, name)
	}
	return nil
}
