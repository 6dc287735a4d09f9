package health

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// FaultEnv names the environment variable of the daemons' fault points
// (docs/development.md lists them): the point it names is acted on when
// the daemon reaches it. Nothing but the tests sets it.
const FaultEnv = "HIVEDR_FAULT"

// FaultLoopHang is the fault point that makes a role's main loop block,
// once it has gone round once, until its context ends, as a loop stuck in
// a call without a deadline would, while the rest of the process (its
// HTTP server, its metrics) goes on.
const FaultLoopHang = "loop.hang"

// Loop publishes a role's main loop's progress as the gauge LoopMetric(role),
// the Unix time in seconds of its last round, for Fresh to read.
type Loop struct {
	gauge  prometheus.Gauge
	rounds atomic.Int64
	hang   bool // FaultEnv named FaultLoopHang when the Loop was made
}

// LoopMetric is the name of role's loop gauge: hivedr_copyd_loop_timestamp_seconds.
func LoopMetric(role string) string { return "hivedr_" + role + "_loop_timestamp_seconds" }

// NewLoop makes role's loop gauge (role: tailer, copyd or applier).
func NewLoop(role string) *Loop {
	return &Loop{
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: LoopMetric(role),
			Help: "Unix time in seconds the " + role + "'s main loop last went round, whether the round did its work or failed and will retry; /healthz fails when it is older than " + role + ".stall_after.",
		}),
		hang: os.Getenv(FaultEnv) == FaultLoopHang,
	}
}

// Collector is the gauge, to register.
func (l *Loop) Collector() prometheus.Collector { return l.gauge }

// Beat marks the loop alive without a round of its work: while it waits
// to retry its start, or a session of its own, after a failure.
func (l *Loop) Beat() { l.gauge.SetToCurrentTime() }

// Round marks a round of the loop; the loop calls it at the start of
// every round. With FaultEnv set to FaultLoopHang, the second round
// blocks, once marked, until ctx ends.
func (l *Loop) Round(ctx context.Context) {
	l.Beat()
	if l.rounds.Add(1) == 2 && l.hang {
		fmt.Fprintf(os.Stderr, "%s=%s: the main loop blocks until the process stops\n", FaultEnv, FaultLoopHang)
		<-ctx.Done()
	}
}
