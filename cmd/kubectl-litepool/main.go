// Command kubectl-litepool is the litepool kubectl plugin: `kubectl litepool ...`.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/plugin"
)

func main() {
	cmd := plugin.NewCmdLitepool(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	// CheckErr prints errors as kubectl does ("error: ...", "Error from server
	// (NotFound): ...") to stderr and exits non-zero.
	cmdutil.CheckErr(cmd.Execute())
}
