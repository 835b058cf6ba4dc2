package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCloseWhenDrainingClosesKeptAliveConnections(t *testing.T) {
	var closing atomic.Bool
	h := closeWhenDraining(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }), &closing)
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	assert.NoError(t, err)
	resp.Body.Close()
	assert.False(t, resp.Close, "serving: the connection stays open for the next request")

	closing.Store(true)
	resp, err = http.Get(srv.URL)
	assert.NoError(t, err)
	resp.Body.Close()
	assert.True(t, resp.Close, "terminating: the answer closes the connection")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "and the request is still served")
}
