package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/testenv"
)

// TestHealthLiveness runs `hivedr copyd` on the stack with
// copyd.stall_after: 10s. Idle (no copy tasks), its main loop still goes
// round: /healthz stays 200 while hivedr_copyd_loop_timestamp_seconds
// advances over more than the stall limit. With HIVEDR_FAULT=loop.hang the
// loop blocks after its first round, as a call without a deadline would:
// /healthz turns 503 naming the loop while /metrics still answers, and a
// SIGTERM still stops the daemon cleanly.
func TestHealthLiveness(t *testing.T) {
	env := testenv.Require(t)
	f := newCopyFixture(t, env, serde(t, env))
	// Idle, the loop goes round every fetch wait (200ms); the limit is
	// far above it, so a loaded machine's pauses (a CI run once saw 3.1s
	// between two rounds) do not make a live daemon look stuck.
	const stall = 10 * time.Second
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := copydConf{prefix: f.prefix, instance: "l" + uniq(t), metricsAddr: addr}.write(t, env)
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), "\ncopyd:\n", fmt.Sprintf("\ncopyd:\n  stall_after: %s\n", stall), 1)
	if y == string(b) {
		t.Fatalf("no copyd section to add stall_after to:\n%s", b)
	}
	if err := os.WriteFile(conf, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	const gauge = "hivedr_copyd_loop_timestamp_seconds"
	loop := func() (float64, bool) {
		m, ok := scrape("http://" + addr + "/metrics")
		v, has := m[gauge]
		return v, ok && has
	}

	// (a) Idle and alive: every probe 200 while the loop goes round.
	p := startHivedr(t, "copyd", "copyd", "-config", conf)
	var first float64
	eventually(t, 2*time.Minute, "copyd's first loop round ("+gauge+" > 0)", func() bool {
		v, ok := loop()
		first = v
		return ok && v > 0
	})
	last, advances := first, 0
	poll(t, 2*time.Minute, 250*time.Millisecond, fmt.Sprintf("%s to advance past %s over its first value", gauge, stall), func() bool {
		if code, body := probe(addr, "/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("/healthz of an idle copyd whose loop goes round: %d %q, want 200 \"ok\\n\"", code, body)
		}
		v, ok := loop()
		if !ok {
			t.Fatalf("/metrics of copyd does not answer with %s", gauge)
		}
		if v > last {
			last = v
			advances++
		}
		return last-first > stall.Seconds()
	})
	if advances < 2 {
		t.Errorf("%s advanced %d times over %.1fs, want a loop going round", gauge, advances, last-first)
	}
	t.Logf("%s advanced %d times over %.1fs, /healthz 200 throughout", gauge, advances, last-first)
	p.stop(t)

	// (b) Stuck: /healthz fails naming the loop, /metrics answers.
	p = startHivedrEnv(t, "copyd (loop.hang)", []string{"HIVEDR_FAULT=loop.hang"}, "copyd", "-config", conf)
	var code int
	var body string
	poll(t, 2*time.Minute, 250*time.Millisecond, "/healthz of the stuck copyd to fail naming its loop", func() bool {
		if p.exited() {
			t.Fatalf("copyd with loop.hang exited:\n%s", tail(p.out.String(), 40))
		}
		code, body = probe(addr, "/healthz")
		return code == http.StatusServiceUnavailable && strings.HasPrefix(body, "fail loop: "+gauge+": the main loop last went round ")
	})
	t.Logf("/healthz of the stuck copyd: %d %q", code, body)
	if !strings.Contains(body, "more than its limit of "+stall.String()) {
		t.Errorf("/healthz body %q does not name the limit %s", body, stall)
	}
	stuck, ok := loop()
	if !ok || stuck <= 0 {
		t.Fatalf("/metrics of the stuck copyd: %s %v (answered %v), want it served with the loop's last round", gauge, stuck, ok)
	}
	if code, _ := probe(addr, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz of the stuck copyd: %d, want 200 (its dependencies are there; being stuck is liveness's business)", code)
	}
	if !strings.Contains(p.out.String(), "HIVEDR_FAULT=loop.hang") {
		t.Errorf("copyd's output does not say it reached the loop.hang point:\n%s", tail(p.out.String(), 20))
	}
	// The hang lasts until the daemon's context ends: SIGTERM stops it.
	p.stop(t)
}
