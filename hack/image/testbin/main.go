// Command testbin is every program the real-node e2e images run, chosen by its first
// argument; it is static and needs nothing from its image:
//
//	pause     the pod sandbox's process: sleeps until SIGTERM or SIGINT, reaping
//	          children (it is PID 1 of the pod's PID namespace)
//	install   a driver installer that succeeds: it changes only the host, as a real
//	          installer does, writing DRIVER_VERSION into DriverVersionFile under
//	          HOST_ROOT. Litepool's node Jobs mount no service-account token, so the
//	          node's runwhere.ai/driver-version label (what upgrade validation reads) is
//	          written by whatever plays the node's feature discovery, with an identity
//	          of its own: in the real-node e2e, the test
//	exit N    prints why and exits N (a failing installer, a failing stress test)
//	linger    a workload that ignores SIGTERM: only the end of its termination grace
//	          period (SIGKILL) stops it
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

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

// DriverVersionFile is where install leaves the version, under the host's root.
const DriverVersionFile = "/run/litepool-testbin/driver-version"

func install(node, version string) error {
	if node == "" || version == "" {
		return fmt.Errorf("NODE_NAME and DRIVER_VERSION must be set (the installer Job sets both)")
	}
	path := filepath.Join(os.Getenv("HOST_ROOT"), DriverVersionFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// Written aside and renamed into place: whoever reads the file (the e2e's feature
	// discovery) sees the whole version or none, never the empty file WriteFile opens.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	fmt.Printf("installed driver %s on node %s (%s)\n", version, node, path)
	return nil
}
