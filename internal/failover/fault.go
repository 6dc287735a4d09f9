package failover

import (
	"fmt"
	"os"
	"syscall"
)

// FaultEnv names the environment variable that freezes a failover at a
// point of its work, as a host pausing the process would: the process
// sends itself SIGSTOP there and goes on at SIGCONT. For the e2e tests
// that must act while a failover stands exactly there, however fast or
// slow the machine is.
const FaultEnv = "HIVEDR_FAULT"

// FaultFenced is the point right after every database of the set is
// marked and the appliers confirmed it, before the figures are measured.
const FaultFenced = "failover.fenced"

// fault freezes the process when FaultEnv names point.
func fault(point string) {
	if os.Getenv(FaultEnv) != point {
		return
	}
	fmt.Fprintf(os.Stderr, "%s=%s: stopping\n", FaultEnv, point)
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
}
