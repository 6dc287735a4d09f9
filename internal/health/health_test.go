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
	Mount(mux, []Check{ok, bad})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
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
	Mount(mux2, []Check{ok, warn})
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
