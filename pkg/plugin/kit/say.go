package kit

import (
	"io"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// SayTo is where Say prints: out in the default format, errOut under -o, so that
// stdout stays parseable. Libraries that report progress to a writer (the upgrader,
// the stress runner, the compat tables of a pre-flight) get this one.
func (m *Mutation) SayTo(streams genericiooptions.IOStreams) io.Writer {
	if m.Output() != "" {
		return streams.ErrOut
	}
	return streams.Out
}
