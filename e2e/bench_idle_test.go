//go:build benchmem || benchscale

package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// profileEnv names a directory: when it is set (and the daemons serve
// Go's profiles, HIVEDR_PPROF=1), idleCPU saves the CPU profile of the
// idle window of the applier, and of each daemon in also, there as
// <name>-idle.pprof.
const profileEnv = "HIVEDR_BENCH_PROFILE"

// idleCPU watches the pipeline's daemons for window, failing the test if
// one exits, and returns the CPU time each used (by name) and how long it
// watched. also maps a daemon's name to its metrics address (host:port)
// for profiling besides the applier's.
func idleCPU(p *pipeline, window time.Duration, also map[string]string) (map[string]time.Duration, time.Duration) {
	p.t.Helper()
	procs := []*proc{p.tail, p.copyd, p.apply}
	before := map[string]time.Duration{}
	for _, pr := range procs {
		before[pr.name] = cpuTime(pr.cmd.Process.Pid)
	}
	addrs := map[string]string{"apply": p.metrics}
	for name, addr := range also {
		addrs[name] = addr
	}
	var profiling sync.WaitGroup
	if dir := os.Getenv(profileEnv); dir != "" && window > 10*time.Second {
		for name, addr := range addrs {
			profiling.Go(func() {
				secs := strconv.Itoa(int((window - 5*time.Second).Seconds()))
				resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=" + secs)
				if err != nil {
					p.t.Logf("%s CPU profile: %v", name, err)
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err == nil && resp.StatusCode == http.StatusOK {
					err = os.WriteFile(filepath.Join(dir, name+"-idle.pprof"), b, 0o644)
				}
				p.t.Logf("%s CPU profile of the idle window: HTTP %d, %d bytes to %s (%v)", name, resp.StatusCode, len(b), dir, err)
			})
		}
	}
	start := time.Now()
	for time.Since(start) < window {
		p.checkAlive()
		time.Sleep(time.Second)
	}
	el := time.Since(start)
	used := map[string]time.Duration{}
	for _, pr := range procs {
		used[pr.name] = cpuTime(pr.cmd.Process.Pid) - before[pr.name]
	}
	profiling.Wait()
	return used, el
}
