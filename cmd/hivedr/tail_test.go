package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivedr/hivedr/internal/health"
)

// stateGauge is a registerer with the tailer's state gauge alone.
type stateGauge struct{ *prometheus.GaugeVec }

func (g stateGauge) Register(r prometheus.Registerer) error { return r.Register(g.GaugeVec) }

// TestHealthTailerLingersOnChainBroken: a tailer stopped on CHAIN_BROKEN
// keeps its metrics server up for the linger, so a scrape sees
// hivedr_tailer_state{pipeline="hivedr",state="CHAIN_BROKEN"} 1, /readyz fails "running"
// and /healthz answers; the linger then ends by itself, or at once when
// the signal context is cancelled (SIGTERM), which also stops the server.
// No metrics address or a zero linger exits at once.
func TestHealthTailerLingersOnChainBroken(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	state := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hivedr_tailer_state"}, []string{"state"})
	state.WithLabelValues("RUNNING").Set(0)
	state.WithLabelValues("CHAIN_BROKEN").Set(1)
	addr, err := serveHTTP(ctx, "tail", "hivedr", "127.0.0.1:0", stateGauge{state}, func(_ context.Context, g prometheus.Gatherer) ([]health.Check, []health.Check) {
		return nil, []health.Check{runningCheck(g)}
	}, log)
	if err != nil {
		t.Fatal(err)
	}

	// Nothing to see, nothing to wait for.
	for _, c := range []struct {
		addr string
		d    time.Duration
	}{{"", time.Hour}, {addr, 0}} {
		start := time.Now()
		if lingerChainBroken(ctx, c.addr, c.d, log) || time.Since(start) > time.Second {
			t.Errorf("linger with address %q for %s waited %s, want an exit at once", c.addr, c.d, time.Since(start))
		}
	}
	// A short linger runs its course.
	start := time.Now()
	if !lingerChainBroken(ctx, addr, 100*time.Millisecond, log) || time.Since(start) < 100*time.Millisecond {
		t.Errorf("a linger of 100ms returned after %s without running its course", time.Since(start))
	}

	// A long one: the server answers during it, and a cancel ends it.
	done := make(chan bool, 1)
	go func() { done <- lingerChainBroken(ctx, addr, time.Hour, log) }()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s during the linger: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `hivedr_tailer_state{pipeline="hivedr",state="CHAIN_BROKEN"} 1`) {
		t.Errorf("/metrics during the linger: %d, want hivedr_tailer_state{pipeline=\"hivedr\",state=\"CHAIN_BROKEN\"} 1 in:\n%s", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || body != "fail running: state is CHAIN_BROKEN, want RUNNING\n" {
		t.Errorf("/readyz during the linger: %d %q", code, body)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz during the linger: %d %q", code, body)
	}
	select {
	case <-done:
		t.Fatal("the linger of an hour ended by itself")
	default:
	}
	cancel()
	select {
	case full := <-done:
		if full {
			t.Error("a cancelled linger says it ran its course")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the linger did not end within 5s of the cancel (SIGTERM)")
	}
	for i := 0; ; i++ {
		if _, err := http.Get("http://" + addr + "/healthz"); err != nil {
			break
		}
		if i == 50 {
			t.Fatal("the metrics server still answers 5s after the cancel")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTailChainBrokenLingerFlag: a negative -chain-broken-linger is a
// usage error naming the flag.
func TestTailChainBrokenLingerFlag(t *testing.T) {
	var stderr strings.Builder
	if code := runTail([]string{"-chain-broken-linger", "-5s"}, io.Discard, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "-chain-broken-linger -5s must not be negative") {
		t.Errorf("runTail -chain-broken-linger -5s: exit %d, stderr %q; want %d naming the flag", code, stderr.String(), exitUsage)
	}
}
