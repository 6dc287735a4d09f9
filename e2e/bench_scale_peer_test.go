//go:build benchscale

package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// idlePeerEnv, when set (to "brokers|pattern|group"), makes the test
// binary the idle peer of `make bench-scale` instead of the benchmark.
const idlePeerEnv = "HIVEDR_BENCH_IDLE_PEER"

// startIdlePeer starts the floor under the idle applier's CPU: a bare
// franz-go group consumer of the topics matching pattern that fetches as
// the applier's event consumer does (read_committed with control
// records, a 500 ms fetch wait, a 30 s metadata age, 16 MiB fetches) and
// commits what it reads, doing nothing else. It runs as this test binary
// in a process of its own, so its CPU time is its own; it is killed at
// the test's end.
func startIdlePeer(t *testing.T, brokers []string, pattern, group string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchScale$", "-test.count=1")
	cmd.Env = append(os.Environ(), idlePeerEnv+"="+strings.Join(brokers, ",")+"|"+pattern+"|"+group)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the idle peer: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// runIdlePeer is the idle peer's process (startIdlePeer): it consumes
// until killed.
func runIdlePeer(t *testing.T, spec string) {
	parts := strings.Split(spec, "|")
	if len(parts) != 3 {
		t.Fatalf("%s=%q: want brokers|pattern|group", idlePeerEnv, spec)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(parts[0], ",")...),
		kgo.ConsumerGroup(parts[2]),
		kgo.ConsumeRegex(),
		kgo.ConsumeTopics(parts[1]),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMaxAge(30*time.Second),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchMaxBytes(16<<20),
		kgo.AutoCommitMarks(),
	)
	if err != nil {
		t.Fatalf("idle peer: %v", err)
	}
	defer cl.Close()
	ctx := context.Background()
	for {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { cl.MarkCommitRecords(r) })
	}
}
