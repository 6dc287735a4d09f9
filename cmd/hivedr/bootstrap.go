package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/bootstrap"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// runBootstrap is `hivedr bootstrap`: it validates the flags, writes one
// BootstrapRequest to the control topic and, unless -no-wait, follows the
// bootstraps the tailer starts for it to their end on DR
// (internal/bootstrap does all of it; this wires and prints).
func runBootstrap(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("bootstrap", "Usage: hivedr bootstrap [flags] (-db NAME_OR_GLOB ... | -all | -repair-chain)\n\n"+
		"Bring existing databases to DR while the source and the pipeline keep running: write one\n"+
		"bootstrap request to <prefix>.control for the running tailer, which snapshots each database in\n"+
		"scope that matches at a cut of the source log and publishes it on the database's topic; copyd\n"+
		"copies its files and the applier applies it. Then follow it until every database's DR\n"+
		"parameters say its bootstrap is done (hivedr.bootstrap.done), showing tables and partitions\n"+
		"applied, files and bytes copied, with rates and ETAs: bars on a terminal, a log line every 10 s\n"+
		"otherwise.\n\n"+
		"-db takes database names or globs (path.Match, e.g. 'sales_*') in the replication scope;\n"+
		"-tables restricts the bootstrap of the one database -db names to those tables. -json prints\n"+
		"the outcome as one JSON object.\n\n"+
		"-repair-chain repairs a tailer stopped on CHAIN_BROKEN (the source log purged past its\n"+
		"checkpoint): restart hivedr tail after it, and it resumes after the gap and bootstraps every\n"+
		"database in scope.\n\n"+
		"Exit status: 0 when every bootstrap is applied on DR (with -no-wait: the request is written);\n"+
		"1 when a database halted on DR, the tailer stopped on a broken chain, the request matched no\n"+
		"database, or a system could not be reached; 2 on bad flags or configuration.", stdout, stderr)
	dbs := dbFlag(fl)
	tables := tablesFlag(fl)
	all := allFlag(fl)
	repair := fl.Bool("repair-chain", false, "repair a broken chain (CHAIN_BROKEN): every database in scope, taken by the tailer at its restart")
	noWait := fl.Bool("no-wait", false, "write the request and exit without following it")
	asJSON := jsonFlag(fl)
	metrics := fl.String("applier-metrics", "", "the applier's /metrics address (host:port), read for the halts it cannot record on DR (a DR database that is not this pipeline's replica); default applier.metrics_addr, \"off\" not to read it")
	conf, log, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "hivedr bootstrap: unexpected arguments %q\n", fl.Args())
		return exitUsage
	}
	opts, err := bootstrap.Options{Databases: *dbs, Tables: *tables, All: *all, RepairChain: *repair}.Validate()
	if err != nil {
		fmt.Fprintf(stderr, "hivedr bootstrap: %v\n", strings.TrimPrefix(err.Error(), bootstrap.ErrUsage.Error()+": "))
		return exitUsage
	}
	for _, w := range bootstrap.PolicyWarnings(&conf.Replication, opts.Databases) {
		fmt.Fprintf(stderr, "hivedr bootstrap: warning: %s\n", w)
	}
	ctx, stop := signalContext()
	defer stop()
	if *metrics == "" {
		*metrics = conf.Applier.MetricsAddr
	}
	if *metrics == "off" {
		*metrics = ""
	}
	b := &bootstrapRun{conf: conf, log: log, stdout: stdout, stderr: stderr, asJSON: *asJSON, metrics: *metrics,
		topics: kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}, terminal: isTerminal(stderr)}
	return b.run(ctx, opts, *noWait)
}

// bootstrapRun is one `hivedr bootstrap`.
type bootstrapRun struct {
	conf           *config.Config
	log            *slog.Logger
	stdout, stderr io.Writer
	asJSON         bool
	terminal       bool
	topics         kafka.Topics
	metrics        string // the applier's /metrics address; "" not read
}

// bootstrapResult is the -json output.
type bootstrapResult struct {
	RequestID string               `json:"request_id"`
	Reason    string               `json:"reason"`
	Databases []string             `json:"requested_databases"`
	Tables    []string             `json:"requested_tables,omitempty"`
	Offset    int64                `json:"control_offset"`
	Outcome   string               `json:"outcome"` // written, done, failed, interrupted
	Elapsed   float64              `json:"elapsed_seconds"`
	Progress  []bootstrap.Database `json:"bootstraps"`
	Errors    []string             `json:"errors,omitempty"`
}

// fail prints what went wrong, errors of authentication and ACLs with
// who hivedr was (connect.Explain).
func (b *bootstrapRun) fail(format string, args ...any) int {
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = connect.Explain(b.conf, err)
		}
	}
	fmt.Fprintf(b.stderr, "hivedr bootstrap: "+format+"\n", args...)
	return exitError
}

func (b *bootstrapRun) run(ctx context.Context, opts bootstrap.Options, noWait bool) int {
	start := time.Now()
	kopts, err := kafkaOpts(b.conf)
	if err != nil {
		return b.fail("%v", err)
	}
	kopts = append(kopts, kgo.DialTimeout(5*time.Second))
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return b.fail("kafka %s: %v", strings.Join(b.conf.Kafka.Brokers, ","), err)
	}
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	serde, err := connect.Serde(sctx, b.conf.SchemaRegistry)
	if err != nil {
		return b.fail("%v", err)
	}
	dec, err := connect.Decoder(b.conf.SchemaRegistry)
	if err != nil {
		return b.fail("%v", err)
	}
	// What the tailer last said: a request behind a broken chain waits
	// for nothing but the repair.
	cp, err := kafka.NewestCheckpoint(sctx, cl, kopts, b.topics.Checkpoints(), b.conf.Source.Name, dec)
	if err != nil {
		return b.fail("tailer checkpoint (%s): %v (is Kafka up?)", b.topics.Checkpoints(), err)
	}
	broken := cp != nil && cp.State == schemas.StateChainBroken
	switch {
	case broken && !opts.RepairChain:
		return b.fail("the tailer of %s stopped on a broken chain (CHAIN_BROKEN at event %d): no bootstrap can run before the repair: %s, then restart hivedr tail",
			b.conf.Source.Name, cp.LastEventID, bootstrap.RepairCommand)
	case !broken && opts.RepairChain:
		// A running tailer ignores a repair (its chain is whole).
		state := "none"
		if cp != nil {
			state = string(cp.State)
		}
		return b.fail("the tailer of %s is not stopped on a broken chain (newest checkpoint: %s): a repair request would be ignored; bootstrap every database with hivedr bootstrap -all",
			b.conf.Source.Name, state)
	case cp == nil:
		fmt.Fprintf(b.stderr, "hivedr bootstrap: warning: the tailer of %s has written no checkpoint yet: it takes the request once it runs\n", b.conf.Source.Name)
	}
	req := bootstrap.Request(opts, b.conf.Source.Name, operator(), time.Now())
	marks, err := bootstrap.Write(sctx, cl, serde, b.topics, b.conf.Kafka, &req)
	if err != nil {
		return b.fail("%v", err)
	}
	cancel()
	scope := "every database in scope"
	if len(req.Databases) > 0 {
		scope = strings.Join(req.Databases, ", ")
	}
	if len(req.Tables) > 0 {
		scope += " (tables " + strings.Join(req.Tables, ", ") + ")"
	}
	fmt.Fprintf(b.stderr, "hivedr bootstrap: request %s (%s: %s) written to %s at offset %d\n",
		req.RequestID, req.Reason, scope, b.topics.Control(), marks.Request)
	if broken {
		fmt.Fprintf(b.stderr, "hivedr bootstrap: restart hivedr tail now: a tailer stopped on CHAIN_BROKEN takes this request at its start\n")
	}
	res := bootstrapResult{RequestID: req.RequestID, Reason: req.Reason, Databases: req.Databases, Tables: req.Tables,
		Offset: marks.Request, Outcome: "written", Progress: []bootstrap.Database{}}
	if noWait {
		return b.finish(res, start, exitOK)
	}

	tr := bootstrap.NewTracker(req.RequestID, marks.Request, opts.RepairChain)
	if !opts.RepairChain {
		// Run again while its bootstrap goes on, the command follows it.
		tr.Adopt(req.Databases)
	}
	dr := &drReader{addr: b.conf.Applier.Metastore, opts: withTimeouts(b.conf.DRMetastoreOptions(), 5*time.Second, 15*time.Second)}
	defer dr.close()
	rep := b.reporter(req.RequestID, start)
	f := &bootstrap.Follower{Opts: kopts, Decoder: dec, Topics: b.topics, Source: b.conf.Source.Name,
		DR: dr.params, Interval: time.Second, Report: rep,
		Problem: func(err error) { b.log.Warn("while following the bootstrap", "err", err) }}
	if b.metrics != "" {
		f.Halts = bootstrap.ScrapeHalts(b.metrics)
	}
	outcome, why, err := f.Run(ctx, tr, marks)
	res.Progress, res.Errors = tr.Databases(), why
	switch {
	case err != nil:
		res.Outcome = "interrupted"
		fmt.Fprintf(b.stderr, "hivedr bootstrap: stopped following request %s (the bootstraps go on; hivedr status shows them): %v\n", req.RequestID, err)
		return b.finish(res, start, exitError)
	case outcome == bootstrap.Done:
		res.Outcome = "done"
		return b.finish(res, start, exitOK)
	}
	res.Outcome = "failed"
	return b.finish(res, start, exitError)
}

// finish prints the outcome (a line per database and the verdict, or the
// JSON object) and returns code.
func (b *bootstrapRun) finish(res bootstrapResult, start time.Time, code int) int {
	res.Elapsed = time.Since(start).Seconds()
	if b.asJSON {
		enc := json.NewEncoder(b.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return b.fail("%v", err)
		}
		return code
	}
	for _, d := range res.Progress {
		fmt.Fprintln(b.stdout, bootstrap.DatabaseLine(d))
	}
	for _, e := range res.Errors {
		fmt.Fprintf(b.stderr, "hivedr bootstrap: %s\n", e)
	}
	switch res.Outcome {
	case "written":
		fmt.Fprintf(b.stdout, "request %s written; follow it with hivedr status\n", res.RequestID)
	case "done":
		t := bootstrap.Totals(res.Progress)
		fmt.Fprintf(b.stdout, "bootstrap done in %s: %d databases, %d tables, %d partitions, %d files (%s) copied\n",
			time.Duration(res.Elapsed*float64(time.Second)).Round(100*time.Millisecond), len(res.Progress),
			t.Applied.Tables, t.Applied.Partitions, t.FilesCopied, bootstrap.Bytes(t.BytesCopied))
	}
	return code
}

// reporter returns the Follower's Report: a frame of bars every second
// on a terminal, a log line every 10 s otherwise.
func (b *bootstrapRun) reporter(requestID string, start time.Time) func(*bootstrap.Tracker) {
	r := bootstrap.NewRenderer(time.Now)
	var last time.Time
	return func(tr *bootstrap.Tracker) {
		dbs := tr.Databases()
		s := bootstrap.Totals(dbs)
		what := "waiting for the tailer to take the request (is hivedr tail running, with source.metastore set?)"
		if tr.Taken() {
			what = fmt.Sprintf("%d databases, %s", len(dbs), time.Since(start).Round(time.Second))
		}
		if b.terminal {
			_ = r.Frame(b.stderr, "bootstrap "+requestID+": "+what, s, dbs)
			return
		}
		line := r.Line(s) // measured every reading, so rates are true
		if time.Since(last) < 10*time.Second {
			return
		}
		last = time.Now()
		attrs := []any{"request", requestID, "progress", line}
		for _, d := range dbs {
			attrs = append(attrs, d.Database, bootstrap.DatabaseLine(d))
		}
		b.log.Info("bootstrap: "+what, attrs...)
	}
}

// drReader reads DR databases' parameters, dialling again after an error.
type drReader struct {
	addr string
	opts hms.Options
	mu   sync.Mutex
	c    *hms.Client
}

func (d *drReader) params(ctx context.Context, db string) (map[string]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		c, err := hms.Dial(ctx, d.addr, d.opts)
		if err != nil {
			return nil, err
		}
		d.c = c
	}
	got, err := d.c.GetDatabase(ctx, db)
	var nso *hive_metastore.NoSuchObjectException
	switch {
	case errors.As(err, &nso):
		return nil, nil
	case err != nil:
		d.c.Close()
		d.c = nil
		return nil, fmt.Errorf("DR metastore %s: get database %s: %w", d.addr, db, err)
	}
	if got.Parameters == nil {
		got.Parameters = map[string]string{}
	}
	return got.Parameters, nil
}

func (d *drReader) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil {
		d.c.Close()
		d.c = nil
	}
}
