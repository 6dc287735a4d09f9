package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	hms "github.com/beltran/gohive/hive_metastore"
	"github.com/hivedr/hivedr/internal/drparam"
)

// internalError is what the metastore answers for an exception its call
// does not declare (the soak saw it from commit_txn while the DR DataNode
// restarted).
func internalError(call string) error {
	return thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "Internal error processing "+call)
}

func TestClassify(t *testing.T) {
	const (
		plain     = "transport"
		refused   = "refused"
		transient = "transient"
	)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"timeout", thrift.NewTTransportException(thrift.TIMED_OUT, "i/o timeout"), plain},
		{"cancelled", fmt.Errorf("call: %w", context.Canceled), plain},
		{"other", errors.New("connection reset by peer"), plain},
		{"internal error", internalError("commit_txn"), transient},
		{"internal error, wrapped", fmt.Errorf("commit_txn of source transaction 604 (policy d): %w", internalError("commit_txn")), transient},
		{"unknown method", thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "Invalid method name: 'get_table'"), refused},
		{"wrong method name", thrift.NewTApplicationException(thrift.WRONG_METHOD_NAME, "wrong method name"), refused},
		{"datanode down", &hms.MetaException{Message: "Got exception: java.net.ConnectException Call From h/127.0.0.1 to 127.0.0.1:9866 failed on connection exception: java.net.ConnectException: Connection refused"}, transient},
		{"safe mode", &hms.MetaException{Message: "Got exception: org.apache.hadoop.hdfs.server.namenode.SafeModeException Cannot create directory /wh/d.db/t. Name node is in safe mode."}, transient},
		{"socket timeout, wrapped", fmt.Errorf("x: %w", &hms.MetaException{Message: "java.net.SocketTimeoutException: 60000 millis timeout"}), transient},
		{"managed directory", &hms.MetaException{Message: "Unable to create database managed directory, failed to create database d"}, refused},
		{"permission", &hms.MetaException{Message: "org.apache.hadoop.security.AccessControlException: Permission denied"}, refused},
		{"exists", exists("table d.t"), refused},
		{"invalid operation", invalidOp("alter is not possible"), refused},
		{"no such object", &hms.NoSuchObjectException{Message: "d.t table not found"}, refused},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := classify("op", c.err)
			var (
				r  *RefusedError
				tr *TransientError
			)
			got := plain
			switch {
			case errors.As(err, &r) && errors.As(err, &tr):
				t.Fatalf("classify(%v) is refused and transient: %v", c.err, err)
			case errors.As(err, &r):
				got = refused
			case errors.As(err, &tr):
				got = transient
			}
			if got != c.want {
				t.Errorf("classify(%v) = %T %v: %s, want %s", c.err, err, err, got, c.want)
			}
			if !errors.Is(err, c.err) || !strings.HasPrefix(err.Error(), "op: ") {
				t.Errorf("classify(%v) = %v: does not wrap it, or name the operation", c.err, err)
			}
		})
	}
	if err := classify("op", nil); err != nil {
		t.Errorf("classify(nil) = %v", err)
	}
}

// failingCreateTable makes the fake's first n create_table calls fail as
// the metastore does with an internal error (n < 0: all of them).
func failingCreateTable(f *fakeHMS, n int32) *atomic.Int32 {
	var failed atomic.Int32
	f.setHook(func(_ context.Context, op string) error {
		if op != "CreateTable" || n >= 0 && failed.Load() >= n {
			return nil
		}
		failed.Add(1)
		return internalError("create_table")
	})
	return &failed
}

// TestApplierRetriesMetastoreFailure: an internal error of the metastore
// is retried with backoff, and the event applied once it passes, with no
// halt.
func TestApplierRetriesMetastoreFailure(t *testing.T) {
	f := newKFix(t, "a")
	ta := srcTable("a", "t", nil, "x int")
	f.publishAll(3, at(createDB(1, "a"), createTable(2, ta), alterTable(3, ta, withParam(ta, "k", "v3"))))
	failed := failingCreateTable(f.ms, 2)
	r := f.start("g", t.TempDir(), nil)
	f.waitMark("a", 3)
	if n := failed.Load(); n != 2 {
		t.Errorf("%d create_table calls failed, want 2", n)
	}
	if n := f.ms.callsOf("CreateTable"); n != 3 {
		t.Errorf("%d create_table calls, want 3 (two failed, then applied)", n)
	}
	if got := f.ms.table("a", "t"); got == nil || got.Parameters["k"] != "v3" {
		t.Errorf("DR table a.t: %s, want it altered by event 3", js(got))
	}
	if _, ok := r.metric(t, "hivedr_applier_halted", map[string]string{"db": "a", "reason": string(ReasonMetastoreRefused)}); ok {
		t.Error("database a is reported halted")
	}
}

// TestApplierHaltsLastingMetastoreFailure: an internal error that lasts
// past applier.halt_after halts the database (metastore_refused), after
// retries, naming the failure and how long it lasted; the other database
// goes on.
func TestApplierHaltsLastingMetastoreFailure(t *testing.T) {
	f := newKFix(t, "a", "b")
	ta := srcTable("a", "t", nil, "x int")
	f.publishAll(2, at(createDB(1, "a"), createTable(2, ta)))
	f.publishAll(2, at(createDB(3, "b"), alterDB(4, "b", map[string]string{"k": "v4"})))
	failed := failingCreateTable(f.ms, -1)
	start := time.Now()
	r := f.start("g", t.TempDir(), func(c *Config) { c.HaltAfter = time.Second })
	f.waitHalted(r, "a", ReasonMetastoreRefused)
	f.waitMark("b", 4)
	if took := time.Since(start); took < time.Second {
		t.Errorf("halted %s after the start, before applier.halt_after (1s)", took)
	}
	if n := failed.Load(); n < 2 {
		t.Errorf("%d create_table calls before the halt, want retries", n)
	}
	note := f.ms.db("a").Parameters[drparam.Halted]
	if !strings.Contains(note, "Internal error processing create_table") || !strings.Contains(note, "failing for 1s") {
		t.Errorf("%s=%q does not name the failure and how long it lasted", drparam.Halted, note)
	}
	if m := f.ms.mark("a"); m != 1 {
		t.Errorf("DR database a at event %d, want 1 (halted at event 2)", m)
	}
}
