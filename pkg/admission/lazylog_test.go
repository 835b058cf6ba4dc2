package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/go-logr/zapr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// A line written through the lazy logger carries every value of the request, the
// names and the caller of the line, as the eager one's does; loggers derived from one
// keep their own values.
func TestLazyLoggerWritesTheRequestsValues(t *testing.T) {
	var out bytes.Buffer
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&out), zapcore.InfoLevel)
	base := zapr.NewLogger(zap.New(core, zap.AddCaller())).WithName("admission")
	req := &admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "u-1", Namespace: "ai-team", Name: "pangu",
		UserInfo: authenticationv1.UserInfo{Username: "alice"}}}

	log := lazyLogConstructor(base, req)
	a, b := log.WithValues("webhook", "pods"), log.WithValues("webhook", "nodes")
	a.V(1).Info("not written at info level")
	a.Info("denied", "rules", []string{"P2"})
	b.Error(errors.New("boom"), "failed")

	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	require.Len(t, lines, 2, out.String())
	var denied, failed map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &denied))
	require.NoError(t, json.Unmarshal(lines[1], &failed))
	assert.Equal(t, "denied", denied["msg"])
	assert.Equal(t, "admission", denied["logger"])
	assert.Equal(t, "u-1", denied["requestID"])
	assert.Equal(t, "alice", denied["user"])
	assert.Equal(t, "ai-team", denied["namespace"])
	assert.Equal(t, "pods", denied["webhook"])
	assert.Equal(t, []any{"P2"}, denied["rules"])
	assert.Contains(t, denied["caller"], "lazylog_test.go", "the caller is the line's, not the wrapper's")
	assert.Equal(t, "nodes", failed["webhook"], "a sibling logger's values are its own")
	assert.Equal(t, "boom", failed["error"])
	assert.Equal(t, "u-1", failed["requestID"])
}
