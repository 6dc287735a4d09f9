package bootstrap

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// DRReader reads a DR database's parameters; nil parameters (and no
// error) when the DR metastore has no such database.
type DRReader func(ctx context.Context, db string) (map[string]string, error)

// Follower follows a request's bootstraps to their end: it reads the
// tailer's checkpoints and the completions from the Marks on, folding
// them into a Tracker, and every Interval reads the DR parameters of the
// databases the request became, then calls Report.
type Follower struct {
	// Opts are the Kafka client's options (seed brokers, ...).
	Opts    []kgo.Opt
	Decoder *schemas.Decoder
	Topics  kafka.Topics
	// Source is the tailer's source name (the checkpoints' key).
	Source string
	DR     DRReader
	// Halts, when set, returns the applier's halted gauges by database
	// (ScrapeHalts); an error is passed to Problem once.
	Halts func(ctx context.Context) (map[string]string, error)
	// Interval is how often the DR is read and Report called.
	Interval time.Duration
	// Report is called after each reading, and once more at the end.
	Report func(*Tracker)
	// Problem is told what failed on the way (the follower retries):
	// a DR metastore that does not answer, a record that does not decode.
	Problem func(error)
}

// Run follows until the Tracker's verdict is Done or Failed, or ctx ends
// (then it returns ctx's error with the verdict so far).
func (f *Follower) Run(ctx context.Context, tr *Tracker, m Marks) (Outcome, []string, error) {
	parts := map[string]map[int32]kgo.Offset{
		f.Topics.Checkpoints(): {0: kgo.NewOffset().At(m.Checkpoints)},
	}
	consumed := map[int32]bool{}
	if len(m.Completions) > 0 {
		parts[f.Topics.Completions()] = map[int32]kgo.Offset{}
		for p, o := range m.Completions {
			parts[f.Topics.Completions()][p] = kgo.NewOffset().At(o)
			consumed[p] = true
		}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ConsumePartitions(parts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted())}, f.Opts...)...)
	if err != nil {
		return Waiting, nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	problem := func(err error) {
		if f.Problem != nil {
			f.Problem(err)
		}
	}
	next := time.Now()
	haltsFailed := false
	for {
		if !time.Now().Before(next) {
			next = time.Now().Add(f.Interval)
			f.addPartitions(ctx, adm, cl, consumed)
			for _, d := range tr.Databases() {
				if d.Done {
					continue
				}
				p, err := f.DR(ctx, d.Database)
				if err != nil {
					problem(fmt.Errorf("DR database %s: %w", d.Database, err))
					continue
				}
				tr.ObserveDR(d.Database, p)
			}
			if f.Halts != nil {
				if h, err := f.Halts(ctx); err == nil {
					tr.ObserveHalts(h)
				} else if !haltsFailed {
					haltsFailed = true
					problem(fmt.Errorf("the applier's metrics (halts not recorded on DR are not seen): %w", err))
				}
			}
			if f.Report != nil {
				f.Report(tr)
			}
			if o, why := tr.Verdict(); o != Waiting {
				return o, why, nil
			}
		}
		pctx, cancel := context.WithDeadline(ctx, next)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			o, why := tr.Verdict()
			return o, why, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch r.Topic {
			case f.Topics.Checkpoints():
				if string(r.Key) != f.Source {
					return
				}
				v, err := f.Decoder.Decode(ctx, r.Value)
				if err != nil {
					problem(fmt.Errorf("%s offset %d: %w", r.Topic, r.Offset, err))
					return
				}
				if cp, ok := v.(*schemas.TailerCheckpoint); ok {
					tr.ObserveCheckpoint(cp)
				}
			case f.Topics.Completions():
				// Only bootstrap tasks' completions are decoded.
				if _, ok := TaskBootstrap(string(r.Key)); !ok {
					return
				}
				v, err := f.Decoder.Decode(ctx, r.Value)
				if err != nil {
					problem(fmt.Errorf("%s/%d offset %d: %w", r.Topic, r.Partition, r.Offset, err))
					return
				}
				if c, ok := v.(*schemas.CopyCompletion); ok {
					tr.ObserveCompletion(c)
				}
			}
		})
	}
}

// addPartitions starts consuming, from their start, completions
// partitions created after the marks were taken (the topic did not exist
// yet, or grew).
func (f *Follower) addPartitions(ctx context.Context, adm *kadm.Client, cl *kgo.Client, consumed map[int32]bool) {
	topic := f.Topics.Completions()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	listed, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return
	}
	add := map[int32]kgo.Offset{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Topic == topic && !consumed[o.Partition] {
			add[o.Partition] = kgo.NewOffset().At(o.Offset)
			consumed[o.Partition] = true
		}
	})
	if len(add) > 0 {
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: add})
	}
}

// ReadCompletions passes to fn, decoded, the committed completions of
// bootstrap copy tasks (TaskBootstrap) written to topic since the given
// time, up to the topic's end when it is called. It reads within ctx and
// reports whether it reached the end of every partition (false: fn saw a
// part of them). `hivedr status` counts the files of bootstraps in
// progress with it, from the earliest one's start.
func ReadCompletions(ctx context.Context, opts []kgo.Opt, dec *schemas.Decoder, topic string, since time.Time,
	fn func(*schemas.CopyCompletion)) (complete bool, err error) {
	acl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, err
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	starts, err := adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topic)
	if err != nil {
		return false, fmt.Errorf("list the offsets of %s after %s: %w", topic, since.UTC().Format(time.RFC3339), err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return false, fmt.Errorf("list the end offsets of %s: %w", topic, err)
	}
	parts := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	starts.Each(func(o kadm.ListedOffset) {
		e, ok := ends.Lookup(o.Topic, o.Partition)
		if o.Err == nil && ok && e.Err == nil && o.Offset < e.Offset {
			parts[o.Partition] = kgo.NewOffset().At(o.Offset)
			end[o.Partition] = e.Offset
		}
	})
	if len(parts) == 0 {
		return true, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}, opts...)...)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	for len(end) > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			e, open := end[r.Partition]
			if !open {
				return
			}
			if r.Offset < e && !r.Attrs.IsControl() {
				if _, ok := TaskBootstrap(string(r.Key)); ok {
					if v, err := dec.Decode(ctx, r.Value); err == nil {
						if c, ok := v.(*schemas.CopyCompletion); ok {
							fn(c)
						}
					}
				}
			}
			// A transaction's marker is its last offset: reaching end-1
			// (or past it) is reaching the end.
			if r.Offset >= e-1 {
				delete(end, r.Partition)
				cl.PauseFetchPartitions(map[string][]int32{topic: {r.Partition}})
			}
		})
	}
	return len(end) == 0, nil
}

// haltedGauge matches a sample of the applier's halted gauge.
var haltedGauge = regexp.MustCompile(`^hivedr_applier_halted\{(.*)\}\s+(\S+)`)

var label = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// ParseHalts reads the halted gauges of the applier's Prometheus text
// exposition: the reason of each halted database.
func ParseHalts(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		m := haltedGauge.FindStringSubmatch(line)
		if m == nil || m[2] != "1" {
			continue
		}
		var db, reason string
		for _, l := range label.FindAllStringSubmatch(m[1], -1) {
			switch l[1] {
			case "db":
				db = l[2]
			case "reason":
				reason = l[2]
			}
		}
		if db != "" {
			out[strings.ToLower(db)] = reason
		}
	}
	return out
}

// ScrapeHalts returns a function reading the halted gauges of the
// applier serving /metrics on addr (host:port).
func ScrapeHalts(addr string) func(ctx context.Context) (map[string]string, error) {
	hc := &http.Client{Timeout: 3 * time.Second}
	return func(ctx context.Context) (map[string]string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET http://%s/metrics: %s", addr, resp.Status)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return nil, fmt.Errorf("GET http://%s/metrics: %w", addr, err)
		}
		return ParseHalts(string(b)), nil
	}
}
