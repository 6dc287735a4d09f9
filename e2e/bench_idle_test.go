//go:build benchmem || benchscale

package e2e

import "time"

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
	return used, el
}
