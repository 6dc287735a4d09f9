package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/health"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/metrics"
	"github.com/hivedr/hivedr/schemas"
)

// pprofEnv, set to 1, adds Go's profiles (/debug/pprof/) to a daemon's
// metrics server.
const pprofEnv = "HIVEDR_PPROF"

// checksFor makes a role's liveness checks (/healthz: reading its metrics
// from g, nothing else) and readiness checks (/readyz: they may read its
// metrics from g, and run until ctx ends).
type checksFor func(ctx context.Context, g prometheus.Gatherer) (live, ready []health.Check)

// serveHTTP registers a role's metrics (role: the command, tail, copyd
// or apply) in a registry of their own (metrics.NewRegistry: with
// hivedr_build_info and the Go runtime and process collectors, every
// metric labelled with the pipeline, metrics.Pipeline of the
// configuration), and serves /metrics, /healthz (the role's liveness
// checks) and /readyz (its readiness checks) on addr until ctx ends. It returns the address it listens on
// (addr's port 0 chosen). An empty addr serves nothing.
func serveHTTP(ctx context.Context, role, pipeline, addr string, m metrics.Registerer, checks checksFor, log *slog.Logger) (string, error) {
	reg, err := metrics.NewRegistry(role, pipeline, m)
	if err != nil {
		return "", err
	}
	if addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	live, ready := checks(ctx, reg)
	health.Mount(mux, live, ready)
	if os.Getenv(pprofEnv) == "1" {
		// Profiles for benchmarks and investigations only: they show the
		// process's stacks and allocation sites to whoever reaches the port.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		log.Warn("serving Go profiles on the metrics address", "env", pprofEnv, "path", "/debug/pprof/")
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics and health", "addr", ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	return ln.Addr().String(), nil
}

// withKerberos is a role's metrics m and, when conf has a Kerberos
// principal, its login metrics (hivedr_kerberos_logins_total,
// hivedr_kerberos_login_failures_total).
func withKerberos(m metrics.Registerer, conf *config.Config) metrics.Registerer {
	if kc := conf.KerberosClient(); kc != nil {
		return registerers{m, kc}
	}
	return m
}

// registerers registers each of its metrics.
type registerers []metrics.Registerer

// Register implements metrics.Registerer.
func (rs registerers) Register(r prometheus.Registerer) error {
	for _, m := range rs {
		if err := m.Register(r); err != nil {
			return err
		}
	}
	return nil
}

// Liveness, every role: loop (its main loop went round within the role's
// stall_after; hivedr_<role>_loop_timestamp_seconds).
//
// Readiness per role (docs/operations.md "Health endpoints" says what each failure
// means to an operator):
//
//	tail:  kafka, source (its log's head is readable), running (state RUNNING:
//	       past start-up, the checkpoint read and the producer fenced in)
//	copyd: kafka, filesystems (a NameNode of every HDFS cluster and every S3
//	       endpoint accept connections)
//	apply: kafka, dr_metastore (answers a Thrift call); not_halted (no
//	       database halted) is reported ("warn") without failing

func tailerChecks(conf *config.Config) checksFor {
	return func(ctx context.Context, g prometheus.Gatherer) ([]health.Check, []health.Check) {
		return loopCheck(g, "tailer", conf.Tailer.StallAfter.Duration), []health.Check{
			kafkaCheck(ctx, conf),
			{Name: "source", Run: func(ctx context.Context) error {
				src, err := hmslog.Open(ctx, conf.Source, conf.SourceMetastoreOptions())
				if err != nil {
					return err
				}
				defer src.Close()
				_, err = src.Head(ctx)
				return err
			}},
			runningCheck(g),
		}
	}
}

// loopCheck is a role's liveness check, "loop": hivedr_<role>_loop_timestamp_seconds
// (role: tailer, copyd or applier) is within stall of now; stall 0
// disables it.
func loopCheck(g prometheus.Gatherer, role string, stall time.Duration) []health.Check {
	return []health.Check{{Name: "loop", Run: health.Fresh(g, health.LoopMetric(role), stall, time.Now)}}
}

// runningCheck is the tailer's "running" check: hivedr_tailer_state is
// RUNNING. It fails while the tailer starts, stops, and while it lingers
// on CHAIN_BROKEN (lingerChainBroken).
func runningCheck(g prometheus.Gatherer) health.Check {
	return health.Check{Name: "running", Run: health.StateIs(g, "hivedr_tailer_state", "state", string(schemas.StateRunning))}
}

func copydChecks(conf *config.Config) checksFor {
	return func(ctx context.Context, g prometheus.Gatherer) ([]health.Check, []health.Check) {
		return loopCheck(g, "copyd", conf.Copyd.StallAfter.Duration), []health.Check{kafkaCheck(ctx, conf), {Name: "filesystems", Run: func(ctx context.Context) error {
			var errs []error
			for _, h := range conf.Filesystems.HDFS {
				errs = append(errs, anyAccepts(ctx, "HDFS NameNode", h.NameNodes))
			}
			for _, s := range conf.Filesystems.S3 {
				if s.Endpoint == "" {
					continue // the AWS default endpoint
				}
				u, err := url.Parse(s.Endpoint)
				if err != nil {
					errs = append(errs, fmt.Errorf("S3 endpoint %s: %w", s.Endpoint, err))
					continue
				}
				port := u.Port()
				if port == "" {
					port = "443"
					if u.Scheme == "http" {
						port = "80"
					}
				}
				errs = append(errs, anyAccepts(ctx, "S3 endpoint", []string{net.JoinHostPort(u.Hostname(), port)}))
			}
			return errors.Join(errs...)
		}}}
	}
}

func applierChecks(conf *config.Config) checksFor {
	return func(ctx context.Context, g prometheus.Gatherer) ([]health.Check, []health.Check) {
		return loopCheck(g, "applier", conf.Applier.StallAfter.Duration), []health.Check{
			kafkaCheck(ctx, conf),
			{Name: "dr_metastore", Run: func(ctx context.Context) error {
				c, err := hms.Dial(ctx, conf.Applier.Metastore, withTimeouts(conf.DRMetastoreOptions(), 2*time.Second, health.DefaultTimeout))
				if err != nil {
					return err
				}
				defer c.Close()
				if _, err := c.GetCurrentNotificationEventId(ctx); err != nil {
					return fmt.Errorf("DR metastore %s: %w", conf.Applier.Metastore, err)
				}
				return nil
			}},
			// A halt is an alert (HivedrDatabaseHalted), not an unready
			// daemon: the other databases go on.
			{Name: "not_halted", Run: health.NoneSet(g, "hivedr_applier_halted", "databases halted"), Warn: true},
		}
	}
}

// kafkaCheck holds while a broker of conf's cluster answers an ApiVersions
// request. Its client lives until ctx ends.
func kafkaCheck(ctx context.Context, conf *config.Config) health.Check {
	kopts, err := kafkaOpts(conf)
	var cl *kgo.Client
	if err == nil {
		cl, err = kgo.NewClient(kopts...)
	}
	if err != nil {
		return health.Check{Name: "kafka", Run: func(context.Context) error { return fmt.Errorf("kafka client: %w", err) }}
	}
	context.AfterFunc(ctx, cl.Close)
	return health.Check{Name: "kafka", Run: func(ctx context.Context) error {
		if err := cl.Ping(ctx); err != nil {
			return fmt.Errorf("no broker of %v answers: %w", conf.Kafka.Brokers, err)
		}
		return nil
	}}
}

// anyAccepts holds when one of addrs accepts a TCP connection.
func anyAccepts(ctx context.Context, what string, addrs []string) error {
	var d net.Dialer
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", a)
		if err == nil {
			c.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no %s of %v accepts connections: %w", what, addrs, errors.Join(errs...))
}
