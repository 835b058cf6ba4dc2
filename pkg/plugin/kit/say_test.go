package kit

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestSayToKeepsStdoutParseableUnderOutput(t *testing.T) {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}
	m := NewMutation()
	assert.Same(t, &out, m.SayTo(streams))
	format := "json"
	m.PrintFlags.OutputFormat = &format
	assert.Same(t, &errOut, m.SayTo(streams))
}
