package admission

import (
	"slices"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// lazyLogConstructor gives each request controller-runtime's usual logger (the
// request's object, resource, user and id as values), but hands the values to the sink
// only when a line is written. zap encodes a logger's values when they are added, and
// controller-runtime adds them twice per request: with litepool's JSON logger that was
// 4.4% of the webhook's CPU during pod creates (issue 43's profile), for lines that
// are rarely written (a denial, an error).
func lazyLogConstructor(base logr.Logger, req *admission.Request) logr.Logger {
	return admission.DefaultLogConstructor(lazyValues(base), req)
}

// lazyValues is base with WithValues deferred until a line is written.
func lazyValues(base logr.Logger) logr.Logger {
	sink := base.GetSink()
	if sink == nil {
		return base
	}
	return logr.New(&lazySink{sink: sink})
}

// lazySink keeps the values added to it and passes them on with each line.
type lazySink struct {
	sink   logr.LogSink
	values []any
}

// Init passes logr.New's call depth on: the sink, initialised once by its own logger,
// then also skips the one frame lazySink adds between the caller and it (the test checks
// that the caller logged is the line's).
func (l *lazySink) Init(info logr.RuntimeInfo) { l.sink.Init(info) }

func (l *lazySink) Enabled(level int) bool { return l.sink.Enabled(level) }

func (l *lazySink) Info(level int, msg string, kv ...any) {
	l.withValues().Info(level, msg, kv...)
}

func (l *lazySink) Error(err error, msg string, kv ...any) {
	l.withValues().Error(err, msg, kv...)
}

func (l *lazySink) WithValues(kv ...any) logr.LogSink {
	// A new slice, never shared: two loggers derived from one must not write into
	// each other's values.
	return &lazySink{sink: l.sink, values: append(slices.Clip(l.values), kv...)}
}

func (l *lazySink) WithName(name string) logr.LogSink {
	return &lazySink{sink: l.sink.WithName(name), values: l.values}
}

func (l *lazySink) withValues() logr.LogSink {
	if len(l.values) == 0 {
		return l.sink
	}
	return l.sink.WithValues(l.values...)
}
