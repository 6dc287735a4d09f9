package config

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const watchBase = `
source: {name: prod}
tailer: {heartbeat_interval: 2s}
replication:
  databases:
%s
  source_roots: ["hdfs://nn:8020/warehouse"]
  path_mappings:
    - {source: "hdfs://nn:8020/", target: "hdfs://dr:8020/"}
`

func watchConf(dbs string) string { return strings.Replace(watchBase, "%s", dbs, 1) }

// TestWatch: a change of replication.databases is sent (with the roots and
// mappings in effect); a file that does not load, or a change of another
// key (with or without the scope), sends nothing and is logged; SIGHUP
// reads the file at once.
func TestWatch(t *testing.T) {
	p := write(t, watchConf("    - {name: finance}"))
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal, 1)
	ch := Watch(ctx, c, 10*time.Millisecond, hup, slog.New(slog.NewTextHandler(&logs, nil)))
	rewrite := func(body string) {
		t.Helper()
		// (A later modification time than the last write, whatever the
		// file system's resolution.)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(p)
		mod := st.ModTime().Add(time.Duration(len(body)) * time.Second)
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	// waitLog waits for the watcher to have logged what (it does before
	// it could send anything for the change).
	waitLog := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !strings.Contains(logs.String(), what); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the watcher did not log %q:\n%s", what, logs.String())
			}
		}
	}
	// recv waits for a send: long when one is due (it returns at once),
	// short when none is (after waitLog showed the change was handled).
	recvWithin := func(d time.Duration) (Replication, bool) {
		select {
		case r := <-ch:
			return r, true
		case <-time.After(d):
			return Replication{}, false
		}
	}
	recv := func() (Replication, bool) { return recvWithin(time.Minute) }
	none := func() (Replication, bool) { return recvWithin(200 * time.Millisecond) }

	rewrite(watchConf("    - {name: finance}\n    - {name: sales, bootstrap: auto}"))
	r, ok := recv()
	if !ok || len(r.Databases) != 2 || r.Databases[1].Name != "sales" || !r.Databases[1].AutoBootstrap() {
		t.Fatalf("after adding sales: %+v, %v", r.Databases, ok)
	}
	if _, err := r.MapLocation("hdfs://nn:8020/warehouse/sales.db/t"); err != nil {
		t.Errorf("the sent policy lost the mappings: %v", err)
	}
	if !r.Replicated("sales", "t") || r.Replicated("hr", "t") {
		t.Error("the sent policy does not put sales (only) in scope with finance")
	}

	rewrite("replication: {databases: [{name: sales, rpo: later}]}\n")
	waitLog("does not load")
	if r, ok := none(); ok {
		t.Fatalf("a file that does not load sent %+v", r)
	}
	if !strings.Contains(logs.String(), "rpo") {
		t.Errorf("the bad file is not logged with its error:\n%s", logs.String())
	}

	rewrite(strings.Replace(watchConf("    - {name: finance}\n    - {name: hr}"), "2s", "3s", 1))
	waitLog("restart it to apply them")
	if r, ok := none(); ok {
		t.Fatalf("a change of tailer.heartbeat_interval (and the scope) sent %+v", r.Databases)
	}
	if !strings.Contains(logs.String(), "keys=[tailer]") {
		t.Errorf("the change of another key is not named:\n%s", logs.String())
	}

	rewrite(watchConf("    - {name: finance}\n    - {name: sales, bootstrap: auto, rpo: 9m}"))
	if r, ok := recv(); !ok || r.RPO("sales") != 9*time.Minute {
		t.Fatalf("after sales's rpo changed: %+v, %v", r.Databases, ok)
	}
	hup <- os.Interrupt
	waitLog("the replication scope is unchanged")
	if r, ok := none(); ok {
		t.Fatalf("a SIGHUP with the scope unchanged sent %+v", r.Databases)
	}
	// (The same size and modification time: only SIGHUP can tell. The
	// new text gets the old time before it replaces the file, so the
	// watcher never sees it with another.)
	st, _ := os.Stat(p)
	body := watchConf("    - {name: finance}\n    - {name: sales, bootstrap: auto, rpo: 8m}")
	next := p + ".next"
	if err := os.WriteFile(next, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(next, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, p); err != nil {
		t.Fatal(err)
	}
	if r, ok := none(); ok {
		t.Fatalf("an unseen change was sent: %+v", r.Databases)
	}
	hup <- os.Interrupt
	if r, ok := recv(); !ok || r.RPO("sales") != 8*time.Minute {
		t.Fatalf("after SIGHUP with sales's rpo changed again: %+v, %v", r.Databases, ok)
	}
	cancel()
	for range ch {
	}
}

func TestLivePolicy(t *testing.T) {
	c, err := Load(write(t, watchConf("    - {name: finance, rpo: 1m}")))
	if err != nil {
		t.Fatal(err)
	}
	l := NewLivePolicy(&c.Replication)
	if !l.Replicated("finance", "t") || l.Replicated("sales", "t") || l.RPO("finance") != time.Minute {
		t.Fatal("the policy loaded")
	}
	next := c.Replication
	next.Databases = append(next.Databases, DatabasePolicy{Name: "sales"})
	next.EnsureDefaults()
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	l.Set(next)
	if !l.Replicated("sales", "t") {
		t.Error("Set did not take")
	}
}
