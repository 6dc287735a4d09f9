package health

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHealthStateIsAndNoneSet(t *testing.T) {
	reg := prometheus.NewRegistry()
	state := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x_state"}, []string{"state"})
	halted := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x_halted"}, []string{"db", "reason"})
	reg.MustRegister(state, halted)

	cases := []struct {
		name      string
		set       func()
		stateErr  string // "" when it holds
		haltedErr string
	}{
		{"nothing yet", func() {}, "x_state: no state yet, want RUNNING", ""},
		{"starting", func() { state.WithLabelValues("STARTING").Set(1) }, "state is STARTING, want RUNNING", ""},
		{"running", func() { state.WithLabelValues("STARTING").Set(0); state.WithLabelValues("RUNNING").Set(1) }, "", ""},
		{"a halt", func() { halted.WithLabelValues("finance", "chain_broken").Set(1) }, "", "1 halted: db=finance reason=chain_broken"},
		{"two halts", func() { halted.WithLabelValues("a", "missing_object").Set(1) }, "", "2 halted: db=a reason=missing_object, db=finance reason=chain_broken"},
		{"released", func() { halted.Reset() }, "", ""},
	}
	for _, c := range cases {
		c.set()
		check := func(what string, err error, want string) {
			switch {
			case want == "" && err != nil:
				t.Errorf("%s: %s: %v, want nil", c.name, what, err)
			case want != "" && (err == nil || err.Error() != want):
				t.Errorf("%s: %s: %v, want %q", c.name, what, err, want)
			}
		}
		check("StateIs", StateIs(reg, "x_state", "state", "RUNNING")(context.Background()), c.stateErr)
		check("NoneSet", NoneSet(reg, "x_halted", "halted")(context.Background()), c.haltedErr)
	}
}

func TestHealthReadyzHandler(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	mux := http.NewServeMux()
	ok := Check{Name: "kafka", Run: func(context.Context) error { return nil }}
	bad := Check{Name: "dr_metastore", Run: func(context.Context) error { return errors.New("connection refused") }}
	Mount(mux, nil, []Check{ok, bad})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (int, string) { return fetch(t, srv.URL+path) }
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || body != "ok kafka\nfail dr_metastore: connection refused\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}

	// A failing Warn check is reported and leaves readiness as it is.
	warn := Check{Name: "not_halted", Run: func(context.Context) error { return errors.New("1 databases halted") }, Warn: true}
	mux2 := http.NewServeMux()
	Mount(mux2, nil, []Check{ok, warn})
	srv2 := httptest.NewServer(mux2)
	defer srv2.Close()
	resp, err := http.Get(srv2.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok kafka\nwarn not_halted: 1 databases halted\n" {
		t.Errorf("/readyz with a failing warn check: %d %q, want 200 naming it", resp.StatusCode, b)
	}

	res := Run(context.Background(), []Check{ok, {Name: "slow", Run: func(context.Context) error { <-block; return nil }}}, 50*time.Millisecond)
	if res[0].Err != nil || res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "timed out") {
		t.Errorf("a check that does not return: %+v", res)
	}
}

// TestHealthFresh: the loop check holds with no series yet, with the
// gauge still 0 (starting), within the limit and at it, fails past it
// naming the gauge, its age and the limit, and never fails disabled.
func TestHealthFresh(t *testing.T) {
	reg := prometheus.NewRegistry()
	loop := NewLoop("copyd")
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	fresh := Fresh(reg, LoopMetric("copyd"), 3*time.Second, clock)
	ctx := context.Background()

	if err := fresh(ctx); err != nil {
		t.Errorf("no series yet: %v, want nil (starting)", err)
	}
	reg.MustRegister(loop.Collector())
	if err := fresh(ctx); err != nil {
		t.Errorf("gauge registered, never set: %v, want nil (starting)", err)
	}
	loop.gauge.Set(float64(now.Add(-2 * time.Second).Unix()))
	if err := fresh(ctx); err != nil {
		t.Errorf("2s old, limit 3s: %v, want nil", err)
	}
	loop.gauge.Set(float64(now.Add(-3 * time.Second).Unix()))
	if err := fresh(ctx); err != nil {
		t.Errorf("3s old, limit 3s: %v, want nil", err)
	}
	loop.gauge.Set(float64(now.Add(-90 * time.Second).Unix()))
	err := fresh(ctx)
	want := "hivedr_copyd_loop_timestamp_seconds: the main loop last went round 1m30s ago (at 2023-11-14T22:11:50Z), more than its limit of 3s: it is stuck"
	if err == nil || err.Error() != want {
		t.Errorf("90s old, limit 3s: %v, want %q", err, want)
	}
	if err := Fresh(reg, LoopMetric("copyd"), 0, clock)(ctx); err != nil {
		t.Errorf("90s old, disabled (0): %v, want nil", err)
	}
	loop.Beat()
	if err := Fresh(reg, LoopMetric("copyd"), 3*time.Second, time.Now)(ctx); err != nil {
		t.Errorf("just beaten: %v, want nil", err)
	}
}

// TestHealthHealthzHandler: /healthz is 200 "ok" while its live checks
// hold, 503 with a line per failing one when one does not; /readyz does
// not run the live checks, nor /healthz the ready ones.
func TestHealthHealthzHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	loop := NewLoop("applier")
	reg.MustRegister(loop.Collector())
	now := time.Unix(1_700_000_000, 0)
	live := []Check{{Name: "loop", Run: Fresh(reg, LoopMetric("applier"), time.Minute, func() time.Time { return now })}}
	ready := []Check{{Name: "kafka", Run: func(context.Context) error { return errors.New("no broker answers") }}}
	mux := http.NewServeMux()
	Mount(mux, live, ready)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (int, string) { return fetch(t, srv.URL+path) }

	loop.gauge.Set(float64(now.Add(-time.Second).Unix()))
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz, loop 1s old: %d %q, want 200 \"ok\\n\" (a dependency away is not liveness's business)", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || body != "fail kafka: no broker answers\n" {
		t.Errorf("/readyz: %d %q, want 503 naming kafka alone", code, body)
	}
	loop.gauge.Set(float64(now.Add(-2 * time.Minute).Unix()))
	code, body := get("/healthz")
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "fail loop: hivedr_applier_loop_timestamp_seconds: the main loop last went round 2m0s ago") ||
		!strings.HasSuffix(body, "more than its limit of 1m0s: it is stuck\n") {
		t.Errorf("/healthz, loop 2m old, limit 1m: %d %q, want 503 naming the loop, its age and the limit", code, body)
	}
}

// TestHealthLoopHangFault: with HIVEDR_FAULT=loop.hang, a loop's first
// round returns and its second blocks, marked, until its context ends;
// without it no round blocks.
func TestHealthLoopHangFault(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain := NewLoop("tailer")
	for range 3 {
		plain.Round(ctx) // would block the test if it hung
	}
	t.Setenv(FaultEnv, FaultLoopHang)
	l := NewLoop("tailer")
	l.Round(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Round(ctx)
	}()
	select {
	case <-done:
		t.Fatal("the second round returned with loop.hang set, want it blocked until the context ends")
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	<-done
	if l.rounds.Load() != 2 {
		t.Errorf("rounds = %d, want 2", l.rounds.Load())
	}
}

// fetch GETs url and returns the status code and body.
func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
