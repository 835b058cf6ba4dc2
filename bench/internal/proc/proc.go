// Package proc holds what the benches read of processes and how they fan work out:
// the CPU time of a cluster's API server and etcd, and a bounded worker pool.
package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ServerPIDs finds the kube-apiserver and etcd processes of the cluster in dir.
func ServerPIDs(dir string) []int {
	if dir == "" {
		return nil
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv0 := strings.SplitN(string(cmdline), "\x00", 2)[0]
		if strings.HasPrefix(argv0, dir) && (strings.HasSuffix(argv0, "/kube-apiserver") || strings.HasSuffix(argv0, "/etcd")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// CPUTime sums user and system CPU time of the processes (Linux /proc, 100 ticks/s).
func CPUTime(pids ...int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		if pid == 0 {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces) start at ") ".
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		utime, uerr := strconv.ParseInt(f[11], 10, 64)
		stime, serr := strconv.ParseInt(f[12], 10, 64)
		if uerr != nil || serr != nil {
			continue // not the stat format this reads: count nothing rather than garbage
		}
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}

// Parallel runs f(0..n-1) on workers goroutines and returns the errors.
func Parallel(n, workers int, f func(i int) error) []error {
	var mu sync.Mutex
	var errs []error
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}
