package plugin

import (
	"k8s.io/apimachinery/pkg/runtime"
	restclient "k8s.io/client-go/rest"
)

// rest returns a copy of cfg that speaks protobuf for built-in types, and a higher
// client-side rate limit than client-go's default 5 QPS, which would throttle paged
// lists of large clusters.
func rest(cfg *restclient.Config) *restclient.Config {
	cfg = restclient.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if cfg.QPS < 50 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	return cfg
}
