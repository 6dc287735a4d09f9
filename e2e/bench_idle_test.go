//go:build benchmem || benchscale

package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// profileEnv names a directory: when it is set (and the daemons serve
// Go's profiles, HIVEDR_PPROF=1), idleCPU saves the applier's CPU
// profile of the idle window there as apply-idle.pprof.
const profileEnv = "HIVEDR_BENCH_PROFILE"

// idleCPU watches the pipeline's daemons for window, failing the test if
// one exits, and returns the CPU time each used (by name) and how long it
// watched.
func idleCPU(p *pipeline, window time.Duration) (map[string]time.Duration, time.Duration) {
	p.t.Helper()
	procs := []*proc{p.tail, p.copyd, p.apply}
	before := map[string]time.Duration{}
	for _, pr := range procs {
		before[pr.name] = cpuTime(pr.cmd.Process.Pid)
	}
	profiled := make(chan struct{})
	if dir := os.Getenv(profileEnv); dir != "" && window > 10*time.Second {
		go func() {
			defer close(profiled)
			secs := strconv.Itoa(int((window - 5*time.Second).Seconds()))
			resp, err := http.Get("http://" + p.metrics + "/debug/pprof/profile?seconds=" + secs)
			if err != nil {
				p.t.Logf("applier CPU profile: %v", err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode == http.StatusOK {
				err = os.WriteFile(filepath.Join(dir, "apply-idle.pprof"), b, 0o644)
			}
			p.t.Logf("applier CPU profile of the idle window: HTTP %d, %d bytes to %s (%v)", resp.StatusCode, len(b), dir, err)
		}()
	} else {
		close(profiled)
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
	<-profiled
	return used, el
}
