package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/producer"
	"github.com/hivedr/hivedr/schemas"
)

// signalContext is cancelled on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// registerer is a role's metrics (producer, copyd and applier Metrics).
type registerer interface {
	Register(prometheus.Registerer) error
}

// newRouter opens the configured filesystems.
func newRouter(conf *config.Config) (*fs.Router, error) {
	r, err := fs.NewRouter(conf.Filesystems)
	if err != nil {
		return nil, fmt.Errorf("config: filesystems.%w", err)
	}
	return r, nil
}

// serveMetrics registers a role's metrics in a registry of their own and
// serves it on addr until ctx ends. An empty addr serves nothing.
func serveMetrics(ctx context.Context, addr string, m registerer, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		return err
	}
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
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
	log.Info("serving metrics", "addr", ln.Addr().String())
	return nil
}

func runTail(args []string, _, stderr io.Writer) int {
	fl, cf := newFlagSet("tail", "Usage: hivedr tail [flags]\n\nPublish the source metastore's notification log to Kafka: one ordered topic per\n"+
		"database, copy tasks for the files events reference, and the tailer's checkpoint, in\n"+
		"one transaction per batch. Exits 3 when the chain of events is broken (purged log).", stderr)
	metricsAddr := fl.String("metrics-addr", "", "serve /metrics here, overriding tailer.metrics_addr")
	conf, log, ok := setup(fl, cf, args, stderr)
	if !ok {
		return exitUsage
	}
	if *metricsAddr != "" {
		conf.Tailer.MetricsAddr = *metricsAddr
	}
	ctx, stop := signalContext()
	defer stop()
	if err := tail(ctx, conf, log); err != nil && ctx.Err() == nil {
		log.Error("tailer stopped", "err", err)
		if errors.Is(err, producer.ErrChainBroken) {
			return exitChainBroken
		}
		return exitError
	}
	return exitOK
}

func tail(ctx context.Context, conf *config.Config, log *slog.Logger) error {
	src, err := hmslog.Open(ctx, conf.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	serde, err := schemas.DialSerde(ctx, conf.SchemaRegistry)
	if err != nil {
		return err
	}
	m := producer.NewMetrics()
	if err := serveMetrics(ctx, conf.Tailer.MetricsAddr, m, log); err != nil {
		return err
	}
	// The source filesystems list external tables' new directories (the
	// metastore lists only managed tables' files in its events).
	router, err := newRouter(conf)
	if err != nil {
		return err
	}
	defer router.Close()
	t, err := producer.New(producer.Config{Conf: conf, Source: src, Codec: serde, Lister: router, Logger: log, Metrics: m})
	if err != nil {
		return err
	}
	return t.Run(ctx)
}
