package producer

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// FaultEnv names the environment variable that freezes the tailer at a
// point of its work, as a host pausing the process would: the tailer
// sends itself SIGSTOP there, once, and goes on at SIGCONT. For the e2e
// tests that must act while the tailer stands exactly there, however
// fast or slow the machine is.
const FaultEnv = "HIVEDR_FAULT"

// FaultBootstrapPaged, followed by ":" and a table name, is the point
// right after a snapshot page is committed with that table in progress
// and some of its partitions published.
const FaultBootstrapPaged = "tailer.bootstrap.paged"

// faultPaged freezes the tailer when FaultEnv names FaultBootstrapPaged
// for the table in progress in the page just committed.
func (t *Tailer) faultPaged(table, donePartition string) {
	point, arg, _ := strings.Cut(os.Getenv(FaultEnv), ":")
	if t.faulted || point != FaultBootstrapPaged || table == "" || donePartition == "" || !strings.EqualFold(arg, table) {
		return
	}
	t.faulted = true
	fmt.Fprintf(os.Stderr, "%s=%s:%s: stopping after partition %s\n", FaultEnv, point, arg, donePartition)
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
}
