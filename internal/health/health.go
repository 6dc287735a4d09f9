// Package health serves a daemon's liveness and readiness on its HTTP
// (metrics) address: /healthz runs the role's liveness checks (its main
// loop still goes round), /readyz its readiness checks.
//
// A check is a named function: nil when its condition holds. Some probe a
// dependency (a Kafka broker answers, a metastore answers a Thrift call),
// others read the role's own metrics (the tailer is RUNNING, no database
// halted, the main loop went round lately), so a role needs no extra
// state for its probes: what its metrics say is what its probes say.
// Liveness checks read metrics only, never the network: a dependency that
// is away is readiness's business, and a restart would not bring it back.
package health

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Check is one liveness or readiness condition of a role.
type Check struct {
	// Name says what is checked: "kafka", "dr_metastore", "not_halted".
	Name string
	// Run returns nil when the condition holds, else what is wrong.
	Run func(ctx context.Context) error
	// Warn makes the check a report only: when it fails, /readyz says so
	// ("warn NAME: ...") and stays 200. For a condition that is an
	// operator's alert rather than a pod that cannot serve (a halted
	// database: restarting or unrouting the daemon would not help, and
	// a rollout waiting on readiness would fail for it).
	Warn bool
}

// DefaultTimeout bounds each check of one /readyz request.
const DefaultTimeout = 3 * time.Second

// Result is one check's outcome.
type Result struct {
	Name string
	Err  error
	Warn bool // the check's Warn
}

// Run runs checks at once, each bounded by timeout, and returns their
// results in the checks' order. A check that does not return in time
// fails with "timed out after ..." (its goroutine is left to finish).
func Run(ctx context.Context, checks []Check, timeout time.Duration) []Result {
	out := make([]Result, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.Run(cctx) }()
			var err error
			select {
			case err = <-done:
			case <-cctx.Done():
				err = fmt.Errorf("timed out after %s", timeout)
			}
			out[i] = Result{Name: c.Name, Err: err, Warn: c.Warn}
		}()
	}
	wg.Wait()
	return out
}

// Mount adds /healthz (the live checks) and /readyz (the ready checks) to
// mux. /readyz is 200 when every check holds (a Warn check aside) and 503
// when one does not; either way its body has a line per check, "ok NAME",
// "fail NAME: what is wrong" or "warn NAME: what is wrong", so a person
// reading it (or a probe's event in Kubernetes) sees the cause. /healthz
// is 200 "ok" while every live check holds (always, with none), else 503
// with a "fail NAME: what is wrong" line per failing check.
func Mount(mux *http.ServeMux, live, ready []Check) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		code, body := report(Run(r.Context(), live, DefaultTimeout))
		if code == http.StatusOK {
			body = "ok\n"
		}
		write(w, code, body)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		code, body := report(Run(r.Context(), ready, DefaultTimeout))
		write(w, code, body)
	})
}

// report is the status and the body of a probe whose checks had res.
func report(res []Result) (int, string) {
	var b strings.Builder
	code := http.StatusOK
	for _, x := range res {
		switch {
		case x.Err != nil && x.Warn:
			fmt.Fprintf(&b, "warn %s: %v\n", x.Name, x.Err)
		case x.Err != nil:
			code = http.StatusServiceUnavailable
			fmt.Fprintf(&b, "fail %s: %v\n", x.Name, x.Err)
		default:
			fmt.Fprintf(&b, "ok %s\n", x.Name)
		}
	}
	return code, b.String()
}

func write(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprint(w, body)
}

// Fresh fails when the gauge name, gathered from g, says its loop last
// went round more than limit before now(): the gauge holds the Unix time
// in seconds of the loop's last round (hivedr_copyd_loop_timestamp_seconds),
// set on every round, failed ones included, so only a loop that no longer
// goes round (a call blocked for good, a deadlock) fails it. It holds
// while the gauge has no series or is still 0 (the role is starting, its
// loop not yet begun), and always when limit is not positive (the check
// disabled). With several series (labels), the latest counts.
func Fresh(g prometheus.Gatherer, name string, limit time.Duration, now func() time.Time) func(context.Context) error {
	return func(context.Context) error {
		if limit <= 0 {
			return nil
		}
		mf, err := family(g, name)
		if err != nil {
			return err
		}
		var last float64
		for _, m := range metrics(mf) {
			last = max(last, gaugeValue(m))
		}
		if last <= 0 {
			return nil
		}
		at := time.Unix(0, int64(last*float64(time.Second)))
		if age := now().Sub(at); age > limit {
			return fmt.Errorf("%s: the main loop last went round %s ago (at %s), more than its limit of %s: it is stuck",
				name, age.Round(100*time.Millisecond), at.UTC().Format(time.RFC3339), limit)
		}
		return nil
	}
}

// StateIs fails unless the gauge vector name, gathered from g, is 1 for
// label=want: the tailer's hivedr_tailer_state{state="RUNNING"}.
func StateIs(g prometheus.Gatherer, name, label, want string) func(context.Context) error {
	return func(context.Context) error {
		mf, err := family(g, name)
		if err != nil {
			return err
		}
		var current []string
		for _, m := range metrics(mf) {
			if gaugeValue(m) == 1 {
				current = append(current, labelValue(m, label))
			}
		}
		if slices.Contains(current, want) {
			return nil
		}
		if len(current) == 0 {
			return fmt.Errorf("%s: no %s yet, want %s", name, label, want)
		}
		return fmt.Errorf("%s is %s, want %s", label, strings.Join(current, ","), want)
	}
}

// NoneSet fails while any series of the gauge vector name, gathered from
// g, is non-zero, naming their labels: the applier's
// hivedr_applier_halted{db,reason}. A metric with no series holds.
func NoneSet(g prometheus.Gatherer, name, what string) func(context.Context) error {
	return func(context.Context) error {
		mf, err := family(g, name)
		if err != nil {
			return err
		}
		var set []string
		for _, m := range metrics(mf) {
			if gaugeValue(m) != 0 {
				set = append(set, labelString(m))
			}
		}
		if len(set) == 0 {
			return nil
		}
		slices.Sort(set)
		return fmt.Errorf("%d %s: %s", len(set), what, strings.Join(set, ", "))
	}
}

// family returns the gathered family called name, or nil when it has no
// series yet.
func family(g prometheus.Gatherer, name string) (*dto.MetricFamily, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf, nil
		}
	}
	return nil, nil
}

func metrics(mf *dto.MetricFamily) []*dto.Metric {
	if mf == nil {
		return nil
	}
	return mf.Metric
}

func gaugeValue(m *dto.Metric) float64 {
	if m.Gauge == nil {
		return 0
	}
	return m.Gauge.GetValue()
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// labelString is a series' labels as db=finance reason=chain_broken.
func labelString(m *dto.Metric) string {
	parts := make([]string, 0, len(m.Label))
	for _, l := range m.Label {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, " ")
}
