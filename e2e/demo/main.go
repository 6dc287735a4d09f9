// Command demo drives the hivedr demo on the local stack (`make
// stack-up`): it runs a scripted workload on the source Hive Metastore and
// its HDFS, and compares the source with the DR replica.
//
// Usage:
//
//	go run ./e2e/demo workload [-db finance] [-reset] [-rows 5] [-config hivedr.yaml]
//	go run ./e2e/demo compare [-db finance[,other...]] [-wait 2m] [-interval 2s] [-config hivedr.yaml]
//	go run ./e2e/demo drop [-db finance]
//	go run ./e2e/demo reset [-config hivedr.yaml]
//	go run ./e2e/demo reverse -out reverse.yaml [-config hivedr.yaml]
//
// workload prints one line per step, with the notification-log events the
// step made. compare prints the databases on the source and the DR side by
// side, table by table and partition by partition (files and bytes), then
// "DR equals source" or every difference; it exits 1 when they differ
// (after -wait, if given, during which it polls), 2 on an error. reset
// deletes the pipeline's Kafka state an earlier run left (the topics under
// kafka.topic_prefix, the copyd and applier groups) so that `make demo`
// (e2e/demo/run.sh) starts like a fresh machine; the daemons must be
// stopped first. reverse writes the reverse pipeline's configuration for
// the demo's drill (its failback).
//
// Addresses come from the stack's env file, found as internal/testenv
// finds it ($HIVEDR_STACK_ENV, $HIVEDR_STACK_DIR/env, or .stack/env above
// the working directory); the source-to-DR path mapping, and for reset the
// Kafka brokers, topic prefix and groups, from the hivedr configuration
// (-config, default: the built-in local-stack defaults).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/testenv"
)

const usage = `usage: demo <command> [flags]

commands:
  workload   run the scripted finance workload on the source metastore
  compare    compare the source with the DR replica; exit 1 when they differ
  drop       drop the database on the source (CASCADE); the drop replicates
  reset      delete the pipeline's topics and consumer groups (daemons stopped)
  reverse    write the reverse pipeline's configuration (the drill's failback)

Run "demo <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command in args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "workload":
		err = runWorkload(ctx, args[1:], stdout, stderr)
	case "compare":
		var equal bool
		equal, err = runCompare(ctx, args[1:], stdout, stderr)
		if err == nil && !equal {
			return 1
		}
	case "drop":
		err = runDrop(ctx, args[1:], stdout, stderr)
	case "reset":
		err = runReset(ctx, args[1:], stdout, stderr)
	case "reverse":
		err = runReverse(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "demo: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo %s: %v\n", args[0], err)
		return 2
	}
	return 0
}

// site is one side of the local stack.
type site struct {
	name     string // SOURCE or DR
	hmsAddr  string
	external string // external root, for the source
	files    *fs.HDFS
}

// stack is what the demo needs of the local stack.
type stack struct {
	src, dr  site
	mapPath  func(string) (string, error)
	mappings []config.PathMapping
}

// loadStack reads the stack's env file and the hivedr configuration at
// configPath ("" for the defaults).
func loadStack(configPath string) (*stack, error) {
	env, err := testenv.Load()
	if err != nil {
		return nil, fmt.Errorf("local stack: %w (start it with `make stack-up`)", err)
	}
	get := func(key string) (string, error) {
		v, ok := env.Lookup(key)
		if !ok || v == "" {
			return "", fmt.Errorf("stack env file %s has no %s; re-run `make stack-up`", env.Path, key)
		}
		return v, nil
	}
	var s stack
	for _, side := range []struct {
		site *site
		key  string
		name string
	}{{&s.src, "SRC", "SOURCE"}, {&s.dr, "DR", "DR"}} {
		side.site.name = side.name
		var nn, web string
		for _, kv := range []struct {
			dst *string
			key string
		}{
			{&side.site.hmsAddr, "HIVEDR_HMS_" + side.key},
			{&side.site.external, "HIVEDR_HMS_" + side.key + "_EXTERNAL"},
			{&nn, "HIVEDR_HDFS_" + side.key + "_NAMENODE"},
			{&web, "HIVEDR_HDFS_" + side.key + "_HTTP"},
		} {
			if *kv.dst, err = get(kv.key); err != nil {
				return nil, err
			}
		}
		side.site.files, err = fs.NewHDFS(fs.HDFSConfig{NameNodes: []string{nn}, WebHDFS: web, User: "hivedr"})
		if err != nil {
			return nil, fmt.Errorf("%s HDFS: %w", side.name, err)
		}
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		return nil, err
	}
	s.mapPath, s.mappings = cfg.Replication.MapPath, cfg.Replication.PathMappings
	return &s, nil
}

func (s *stack) close() {
	s.src.files.Close()
	s.dr.files.Close()
}

func dial(ctx context.Context, st site) (*hms.Client, error) {
	c, err := hms.Dial(ctx, st.hmsAddr, hms.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s metastore: %w (is the stack up? `make stack-status`)", st.name, err)
	}
	return c, nil
}

func runWorkload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("workload", flag.ContinueOnError)
	fl.SetOutput(stderr)
	db := fl.String("db", "finance", "database to create and work in")
	reset := fl.Bool("reset", false, "drop the database on the source first (CASCADE) when it exists")
	rows := fl.Int("rows", 5, "rows per data file written")
	configPath := fl.String("config", "", "hivedr configuration file (default: the local stack's)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	st, err := loadStack(*configPath)
	if err != nil {
		return err
	}
	defer st.close()
	c, err := dial(ctx, st.src)
	if err != nil {
		return err
	}
	defer c.Close()
	w := workload.NewSource(c, st.src.files, st.src.external)
	sc := &script{ctx: ctx, c: c, out: stdout}
	fmt.Fprintf(stdout, "workload on the source metastore %s, data under %s\n", st.src.hmsAddr, st.src.external)

	if _, err := c.GetDatabase(ctx, *db); err == nil {
		if !*reset {
			return fmt.Errorf("database %s already exists on the source; pass -reset to drop it first", *db)
		}
		if err := sc.step("drop database "+*db+" cascade (reset)", func() (string, error) {
			return "", w.DropDatabase(ctx, *db)
		}); err != nil {
			return err
		}
	} else if !isNotFound(err) {
		return fmt.Errorf("get database %s: %w", *db, err)
	}

	tx, acct := *db+".transactions", *db+".accounts"
	txCols := []string{"txn_id bigint", "account_id bigint", "amount decimal(12,2)", "currency string"}
	acctCols := []string{"account_id bigint", "owner string", "opened date"}
	day := func(d string) []string { return []string{d} }
	file := func(f workload.File, err error) (string, error) {
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("wrote %s (%d bytes)", shortPath(f.Location), f.Size), nil
	}
	steps := []struct {
		what string
		do   func() (string, error)
	}{
		{"create database " + *db, func() (string, error) {
			return "", w.CreateDatabase(ctx, *db)
		}},
		{fmt.Sprintf("create external table %s (%s) partitioned by (dt string)", tx, strings.Join(txCols, ", ")), func() (string, error) {
			return "", w.CreateTable(ctx, *db, "transactions", workload.TableSpec{Columns: txCols, PartitionKeys: []string{"dt"}})
		}},
		{fmt.Sprintf("create external table %s (%s)", acct, strings.Join(acctCols, ", ")), func() (string, error) {
			return "", w.CreateTable(ctx, *db, "accounts", workload.TableSpec{Columns: acctCols})
		}},
		{"add partitions dt=2026-01-01, dt=2026-01-02, dt=2026-01-03 to " + tx, func() (string, error) {
			files, err := w.AddPartitions(ctx, *db, "transactions", [][]string{day("2026-01-01"), day("2026-01-02"), day("2026-01-03")}, *rows)
			return fmt.Sprintf("wrote %d files first", len(files)), err
		}},
		{"insert into " + acct, func() (string, error) {
			return file(w.Insert(ctx, *db, "accounts", nil, *rows))
		}},
		{"insert into " + tx + " partition (dt=2026-01-02)", func() (string, error) {
			return file(w.Insert(ctx, *db, "transactions", day("2026-01-02"), *rows))
		}},
		{"insert overwrite " + tx + " partition (dt=2026-01-03)", func() (string, error) {
			return file(w.InsertOverwrite(ctx, *db, "transactions", day("2026-01-03"), *rows))
		}},
		{"alter table " + acct + " add columns (status string)", func() (string, error) {
			return "", w.AlterTableAddColumn(ctx, *db, "accounts", "status string")
		}},
		{"insert into " + acct, func() (string, error) {
			return file(w.Insert(ctx, *db, "accounts", nil, *rows))
		}},
		{"alter table " + acct + " rename to " + *db + ".customer_accounts", func() (string, error) {
			return "", w.RenameTable(ctx, *db, "accounts", "customer_accounts")
		}},
		{"drop table " + tx + " purge", func() (string, error) {
			return "", w.DropTable(ctx, *db, "transactions", true)
		}},
		{"create external table " + tx + " (txn_id string, account_id bigint, amount decimal(14,2), currency string, channel string) partitioned by (dt string, region string)", func() (string, error) {
			return "", w.CreateTable(ctx, *db, "transactions", workload.TableSpec{
				Columns:       []string{"txn_id string", "account_id bigint", "amount decimal(14,2)", "currency string", "channel string"},
				PartitionKeys: []string{"dt", "region"},
			})
		}},
		{"add partitions (dt=2026-02-01, region=eu), (dt=2026-02-01, region=us) to " + tx, func() (string, error) {
			files, err := w.AddPartitions(ctx, *db, "transactions", [][]string{{"2026-02-01", "eu"}, {"2026-02-01", "us"}}, *rows)
			return fmt.Sprintf("wrote %d files first", len(files)), err
		}},
		{"insert into " + tx + " partition (dt=2026-02-01, region=eu)", func() (string, error) {
			return file(w.Insert(ctx, *db, "transactions", []string{"2026-02-01", "eu"}, *rows))
		}},
	}
	for _, s := range steps {
		if err := sc.step(s.what, s.do); err != nil {
			return err
		}
	}
	live := w.LiveFiles()
	var bytes int64
	for _, f := range live {
		bytes += f.Size
	}
	fmt.Fprintf(stdout, "done: %d steps, %d data files live on the source (%s), %d written in all\n",
		sc.n, len(live), size(bytes), len(w.Files()))
	return nil
}

func runDrop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("drop", flag.ContinueOnError)
	fl.SetOutput(stderr)
	db := fl.String("db", "finance", "database to drop")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	st, err := loadStack("")
	if err != nil {
		return err
	}
	defer st.close()
	c, err := dial(ctx, st.src)
	if err != nil {
		return err
	}
	defer c.Close()
	w := workload.NewSource(c, st.src.files, st.src.external)
	sc := &script{ctx: ctx, c: c, out: stdout}
	return sc.step("drop database "+*db+" cascade", func() (string, error) { return "", w.DropDatabase(ctx, *db) })
}

// script numbers and prints workload steps with the events each made.
type script struct {
	ctx context.Context
	c   *hms.Client
	out io.Writer
	n   int
}

func (s *script) step(what string, do func() (string, error)) error {
	s.n++
	before, err := s.c.GetCurrentNotificationEventId(s.ctx)
	if err != nil {
		return fmt.Errorf("current event ID: %w", err)
	}
	note, err := do()
	if err != nil {
		fmt.Fprintf(s.out, "%3d  %s: FAILED\n", s.n, what)
		return err
	}
	after, err := s.c.GetCurrentNotificationEventId(s.ctx)
	if err != nil {
		return fmt.Errorf("current event ID: %w", err)
	}
	events := "no event"
	switch n := after.EventId - before.EventId; {
	case n == 1:
		events = fmt.Sprintf("event %d", after.EventId)
	case n > 1:
		events = fmt.Sprintf("events %d-%d", before.EventId+1, after.EventId)
	}
	if note != "" {
		note = "; " + note
	}
	fmt.Fprintf(s.out, "%3d  %s  [%s%s]\n", s.n, what, events, note)
	return nil
}

func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) (equal bool, err error) {
	fl := flag.NewFlagSet("compare", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dbList := fl.String("db", "finance", "databases to compare, comma-separated")
	wait := fl.Duration("wait", 0, "poll until the DR equals the source or this much time passes")
	interval := fl.Duration("interval", 2*time.Second, "time between polls with -wait")
	configPath := fl.String("config", "", "hivedr configuration file for the path mappings (default: the local stack's)")
	if err := fl.Parse(args); err != nil {
		return false, err
	}
	if fl.NArg() > 0 {
		return false, fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	var dbs []string
	for _, d := range strings.Split(*dbList, ",") {
		if d = strings.ToLower(strings.TrimSpace(d)); d != "" {
			dbs = append(dbs, d)
		}
	}
	if len(dbs) == 0 {
		return false, errors.New("-db: no database named")
	}
	st, err := loadStack(*configPath)
	if err != nil {
		return false, err
	}
	defer st.close()
	src, err := dial(ctx, st.src)
	if err != nil {
		return false, err
	}
	defer src.Close()
	dr, err := dial(ctx, st.dr)
	if err != nil {
		return false, err
	}
	defer dr.Close()

	started := time.Now()
	deadline := started.Add(*wait)
	for {
		a, err := workload.Capture(ctx, src, st.src.files, dbs)
		if err != nil {
			return false, fmt.Errorf("source: %w", err)
		}
		b, err := workload.Capture(ctx, dr, st.dr.files, dbs)
		if err != nil {
			return false, fmt.Errorf("DR: %w", err)
		}
		diffs := workload.DiffSnapshots(a, b, st.mapPath)
		if len(diffs) == 0 || !time.Now().Before(deadline) {
			printComparison(stdout, st, dbs, a, b, diffs)
			return len(diffs) == 0, nil
		}
		fmt.Fprintf(stdout, "waiting for the DR: %d differences after %s\n", len(diffs), time.Since(started).Round(time.Second))
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(*interval):
		}
	}
}

// printComparison prints the two snapshots side by side, then the verdict.
func printComparison(out io.Writer, st *stack, dbs []string, a, b *workload.Snapshot, diffs []workload.Diff) {
	var maps []string
	for _, m := range st.mappings {
		maps = append(maps, m.Source+" -> "+m.Target)
	}
	fmt.Fprintf(out, "source %s, DR %s; paths %s\n\n", st.src.hmsAddr, st.dr.hmsAddr, strings.Join(maps, ", "))
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "\tSOURCE\tDR")
	for _, name := range dbs {
		da, db := a.Databases[name], b.Databases[name]
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, dbSummary(da), dbSummary(db))
		for _, tn := range tableNames(da, db) {
			fmt.Fprintf(tw, "  %s.%s\t%s\t%s\n", name, tn, tableSummary(da, tn), tableSummary(db, tn))
			for _, pk := range partitionKeys(da, db, tn) {
				fmt.Fprintf(tw, "      %s\t%s\t%s\n", partitionName(da, db, tn, pk), partitionSummary(da, tn, pk), partitionSummary(db, tn, pk))
			}
		}
	}
	tw.Flush()
	fmt.Fprintln(out)
	for _, name := range dbs {
		if a.Databases[name] == nil && b.Databases[name] == nil {
			fmt.Fprintf(out, "note: database %s is on neither side\n", name)
		}
	}
	if len(diffs) == 0 {
		fmt.Fprintln(out, "DR equals source.")
		return
	}
	fmt.Fprintf(out, "DR differs from source (%d):\n", len(diffs))
	for _, d := range diffs {
		fmt.Fprintf(out, "  %s\n", d)
	}
}

func dbSummary(d *workload.Database) string {
	if d == nil {
		return "-"
	}
	c := d.Counts()
	return fmt.Sprintf("%d tables, %d partitions, %d files, %s", c.Tables, c.Partitions, c.Files, size(c.Bytes))
}

func tableSummary(d *workload.Database, name string) string {
	if d == nil || d.Tables[name] == nil {
		return "-"
	}
	t := d.Tables[name]
	c := t.Counts()
	shape := fmt.Sprintf("%d cols", len(t.Columns))
	if len(t.PartitionKeys) > 0 {
		shape += fmt.Sprintf(", %d partitions", c.Partitions)
	}
	return fmt.Sprintf("%s, %d files, %s", shape, c.Files, size(c.Bytes))
}

// partitionKeys returns the keys of table tn's partitions on either side.
func partitionKeys(a, b *workload.Database, tn string) []string {
	var keys []string
	for _, d := range []*workload.Database{a, b} {
		if d == nil || d.Tables[tn] == nil {
			continue
		}
		for k := range d.Tables[tn].Partitions {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// partitionName spells a partition as Hive does: k1=v1/k2=v2.
func partitionName(a, b *workload.Database, tn, key string) string {
	for _, d := range []*workload.Database{a, b} {
		if d == nil || d.Tables[tn] == nil || d.Tables[tn].Partitions[key] == nil {
			continue
		}
		t, p := d.Tables[tn], d.Tables[tn].Partitions[key]
		var parts []string
		for i, v := range p.Values {
			if i < len(t.PartitionKeys) {
				v = t.PartitionKeys[i].Name + "=" + v
			}
			parts = append(parts, v)
		}
		return strings.Join(parts, "/")
	}
	return key
}

func partitionSummary(d *workload.Database, tn, key string) string {
	if d == nil || d.Tables[tn] == nil || d.Tables[tn].Partitions[key] == nil {
		return "-"
	}
	var n int
	var bytes int64
	for _, f := range d.Tables[tn].Partitions[key].Files {
		n++
		bytes += f.Size
	}
	files := "files"
	if n == 1 {
		files = "file"
	}
	return fmt.Sprintf("%d %s, %s", n, files, size(bytes))
}

func tableNames(ds ...*workload.Database) []string {
	seen := map[string]bool{}
	var names []string
	for _, d := range ds {
		if d == nil {
			continue
		}
		for n := range d.Tables {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// shortPath drops the scheme and authority of a location.
func shortPath(loc string) string {
	if _, rest, ok := strings.Cut(loc, "://"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			return rest[i:]
		}
	}
	return loc
}

func isNotFound(err error) bool {
	var nso *hive_metastore.NoSuchObjectException
	return errors.As(err, &nso)
}
