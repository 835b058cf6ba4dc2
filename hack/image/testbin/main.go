// Command testbin is every program the real-node e2e images run, chosen by its first
// argument; it is static and needs nothing from its image:
//
//	pause     the pod sandbox's process: sleeps until SIGTERM or SIGINT, reaping
//	          children (it is PID 1 of the pod's PID namespace)
//	install   a driver installer that succeeds: it writes DRIVER_VERSION into its node's
//	          runwhere.ai/driver-version label (the label upgrade validation reads), as a
//	          real installer's driver and feature discovery would, through the API with
//	          its pod's service account
//	exit N    prints why and exits N (a failing installer, a failing stress test)
//	linger    a workload that ignores SIGTERM: only the end of its termination grace
//	          period (SIGKILL) stops it
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testbin pause|install|exit N")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
		pause()
	case "install":
		if err := install(os.Getenv("NODE_NAME"), os.Getenv("DRIVER_VERSION")); err != nil {
			fmt.Fprintln(os.Stderr, "install:", err)
			os.Exit(1)
		}
	case "linger":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		for {
			time.Sleep(time.Hour)
		}
	case "exit":
		code := 1
		if len(os.Args) > 2 {
			code, _ = strconv.Atoi(os.Args[2])
		}
		fmt.Fprintf(os.Stderr, "testbin: failing on purpose with exit code %d (node %s)\n", code, os.Getenv("NODE_NAME"))
		os.Exit(code)
	default:
		fmt.Fprintf(os.Stderr, "testbin: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

func pause() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

func install(node, version string) error {
	if node == "" || version == "" {
		return fmt.Errorf("NODE_NAME and DRIVER_VERSION must be set (the installer Job sets both)")
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"runwhere.ai/driver-version": version}}})
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + "/api/v1/nodes/" + node
	req, err := http.NewRequest(http.MethodPatch, url, bytes.NewReader(patch))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PATCH node %s: %s: %s", node, resp.Status, body)
	}
	fmt.Printf("installed driver %s on node %s\n", version, node)
	return nil
}
