package kit

import (
	"bytes"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type row struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
}

func TestDataOutput(t *testing.T) {
	data := []row{{"driver", "ok"}, {"cann", "incompatible"}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "json"}, "[\n  {\n    \"name\": \"driver\",\n    \"verdict\": \"ok\"\n  },\n  {\n    \"name\": \"cann\",\n    \"verdict\": \"incompatible\"\n  }\n]\n"},
		{[]string{"-o", "yaml"}, "- name: driver\n  verdict: ok\n- name: cann\n  verdict: incompatible\n"},
		{[]string{"-o", "jsonpath={.items[*].verdict}"}, "ok incompatible"},
		{[]string{"-o", `go-template={{range .items}}{{.name}};{{end}}`}, "driver;cann;"},
	} {
		o := NewDataOutput("wide")
		cmd := &cobra.Command{Use: "x"}
		o.AddFlags(cmd)
		require.NoError(t, cmd.ParseFlags(tc.args))
		require.NoError(t, o.Validate(), "%v", tc.args)
		require.True(t, o.Data())
		var out bytes.Buffer
		require.NoError(t, o.Print(&out, data), "%v", tc.args)
		assert.Equal(t, tc.want, out.String(), "%v", tc.args)
	}
}

func TestDataOutputOwnFormatsAndErrors(t *testing.T) {
	o := NewDataOutput("wide")
	cmd := &cobra.Command{Use: "x"}
	o.AddFlags(cmd)
	require.NoError(t, cmd.ParseFlags([]string{"-o", "wide"}))
	assert.False(t, o.Data(), "wide is the command's own table")
	assert.NoError(t, o.Validate())

	o.Format = "table"
	assert.ErrorContains(t, o.Validate(), `invalid -o "table": must be one of wide, json, yaml, jsonpath,`)
	o.Format = "name"
	assert.ErrorContains(t, o.Validate(), `invalid -o "name": this command prints data, not objects: use one of wide, json, yaml`)
	o.Format = "jsonpath={.items[}"
	assert.Error(t, o.Validate(), "a broken template is refused before anything runs")
}
