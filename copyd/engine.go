package copyd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hdfscrc"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Resolver finds the store that holds a location (the fs Router).
type Resolver interface {
	// Split returns the FS of location and the path to give that FS.
	Split(location string) (fs.FS, string, error)
}

// FileChecksummer is implemented by stores that can report a file's
// checksum in the form the metastore logs it when change management is on:
// the hex of Hadoop's FileChecksum bytes (ReplChangeManager.checksumFor;
// for HDFS, what WebHDFS GETFILECHECKSUM answers). The engine uses it to
// tell whether a source still holds the bytes of the event when the event's
// checksum is not a CRC32C. ok is false when the store cannot say.
type FileChecksummer interface {
	FileChecksum(ctx context.Context, path string) (hexSum string, ok bool, err error)
}

// SnapshotFinder is implemented by stores that keep snapshots of
// directories (HDFS). SnapshotCandidates returns the locations of the file
// at path inside the snapshots that hold a file there, newest snapshot
// first. When neither the source nor its change-management copy holds the
// event's bytes, the engine checks these in turn and copies from the first
// whose checksum equals the event's; a candidate that is not within the
// source roots is not read.
type SnapshotFinder interface {
	SnapshotCandidates(ctx context.Context, path string) ([]string, error)
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	// SourceRoots are the only locations the engine reads (required).
	SourceRoots []string
	// CMRoots are further locations the engine may read change-management
	// copies from, for change-management roots outside SourceRoots.
	CMRoots []string
	// TargetRoots are the only locations the engine writes (required).
	TargetRoots []string
	// MapPath, when set, is the replication's path mapping (a source
	// path to its DR path); a task's target must then be one the tailer
	// makes of its source (acid.CopyTargets of its mapping), so that whoever
	// can write the manifests topic cannot point a copy at any other DR
	// file under the target roots. nil (`hivedr copy`, whose source and
	// target are given together): targets are only confined to the roots.
	MapPath func(source string) (string, error)
	// Retries is how many times a failed attempt is made again (transient
	// errors and checksum mismatches); 0: none. hivedr's configuration
	// defaults it to 5.
	Retries int
	// InitialBackoff is the wait before the first retry, doubled for each
	// further one up to MaxBackoff, with jitter. Defaults 200ms and 30s.
	InitialBackoff, MaxBackoff time.Duration
	// BytesPerSecond limits the bandwidth of all the Engine's copies
	// together; 0: unlimited.
	BytesPerSecond int64
	// SplitSize: a file larger than this is copied as ranges in parallel
	// to a target store that can take ranges (fs.Splitter: S3 parts of one
	// multipart upload; HDFS part files joined with CONCAT, when the
	// cluster is configured for it), each range read from the source with
	// its own ranged read. 0: every file is one stream.
	SplitSize int64
	// SplitWorkers is the most ranges of one file copied at once. A split
	// copy adds range workers beyond its first only while the Engine runs
	// fewer than SplitWorkers copy streams in all (whole files and ranges),
	// so splitting speeds up a large file copied alone and adds no streams
	// to an Engine busy with many (copyRanges). 0: copyd.split_workers'
	// default.
	SplitWorkers int
	// Preserve is the source metadata each copy keeps on its target (owner,
	// group, permission bits, modification time); the zero value keeps
	// none.
	Preserve Preserve
	// Staging, if set, is told of every write in progress.
	Staging StagingLog
	// Logger says why a failed attempt is retried; nil: slog.Default().
	Logger *slog.Logger
	// Now and Sleep replace the clock in tests. Defaults time.Now and a
	// context-aware timer.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Engine copies and verifies files, one copy task at a time per call; it is
// safe for concurrent use, and its copies share one bandwidth limit.
type Engine struct {
	cfg            EngineConfig
	r              Resolver
	m              *Metrics
	src, read, tgt []location.Location // read: src + CM roots
	thr            *throttle
	bufs           sync.Pool
	dirs           dirCache // target directories whose metadata was kept (dirs.go)
	rw             *iceberg.Rewriter
	// streams counts the copy streams running: whole-file transfers and
	// range workers of split ones (copyRanges).
	streams          atomic.Int64
	now              func() time.Time
	sleep            func(context.Context, time.Duration) error
	initial, maxWait time.Duration
}

// NewEngine checks cfg and returns an Engine that reaches stores through r.
// A nil m means new, unregistered metrics.
func NewEngine(cfg EngineConfig, r Resolver, m *Metrics) (*Engine, error) {
	if r == nil {
		return nil, errors.New("copyd: NewEngine needs a Resolver")
	}
	if cfg.Retries < 0 {
		return nil, fmt.Errorf("copyd: retries %d must not be negative", cfg.Retries)
	}
	if cfg.BytesPerSecond < 0 {
		return nil, fmt.Errorf("copyd: bytes per second %d must not be negative", cfg.BytesPerSecond)
	}
	if cfg.SplitSize < 0 || cfg.SplitWorkers < 0 {
		return nil, fmt.Errorf("copyd: split size %d and split workers %d must not be negative", cfg.SplitSize, cfg.SplitWorkers)
	}
	config.FillZero(&cfg.SplitWorkers, "copyd.split_workers")
	if m == nil {
		m = NewMetrics()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Engine{cfg: cfg, r: r, m: m, now: cfg.Now, sleep: cfg.Sleep,
		initial: cfg.InitialBackoff, maxWait: cfg.MaxBackoff}
	if e.now == nil {
		e.now = time.Now
	}
	if e.sleep == nil {
		e.sleep = sleepCtx
	}
	if e.initial <= 0 {
		e.initial = 200 * time.Millisecond
	}
	if e.maxWait <= 0 {
		e.maxWait = 30 * time.Second
	}
	var err error
	if e.src, err = parseRoots("source root", cfg.SourceRoots); err != nil {
		return nil, err
	}
	if e.tgt, err = parseRoots("target root", cfg.TargetRoots); err != nil {
		return nil, err
	}
	cm, err := parseRoots("change-management root", cfg.CMRoots)
	if err != nil {
		return nil, err
	}
	if len(e.src) == 0 || len(e.tgt) == 0 {
		return nil, errors.New("copyd: NewEngine needs source roots and target roots")
	}
	e.read = append(append([]location.Location(nil), e.src...), cm...)
	e.thr = newThrottle(cfg.BytesPerSecond, e.now, e.sleep, m.waited)
	e.bufs.New = func() any { b := make([]byte, copyBufferSize); return &b }
	e.rw = e.newRewriter()
	return e, nil
}

// copyBufferSize is the size of the buffer each copy streams through.
const copyBufferSize = 1 << 20

func parseRoots(what string, roots []string) ([]location.Location, error) {
	var out []location.Location
	for i, r := range roots {
		l, err := location.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("copyd: %s %d: %w", what, i, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// confine returns the canonical form of loc (package location) if it lies
// under one of roots, and an error naming loc otherwise. The canonical
// form is what was checked, and the only form the engine uses from then
// on.
func confine(what, loc string, roots []location.Location) (string, error) {
	l, err := location.Parse(loc)
	if err != nil {
		return "", permanent(fmt.Errorf("%s %q refused: %w", what, loc, err))
	}
	for _, r := range roots {
		if l.Within(r) {
			return l.String(), nil
		}
	}
	return "", permanent(fmt.Errorf("%s %s refused: outside the configured roots", what, loc))
}

// mapped checks that tgt, canonical as src is, is a target the tailer
// makes of src (EngineConfig.MapPath).
func (e *Engine) mapped(src, tgt, subdir string) error {
	if e.cfg.MapPath == nil {
		return nil
	}
	// A bootstrap reads files of snapshottable directories from their
	// HDFS snapshot: the target is the live path's.
	live := liveSource(src)
	m, err := e.cfg.MapPath(live)
	if err != nil {
		return permanent(fmt.Errorf("target %s refused: source %s has no DR path: %w", tgt, src, err))
	}
	for _, want := range acid.CopyTargets(m, subdir) {
		if l, err := location.Parse(want); err == nil && l.String() == tgt {
			return nil
		}
	}
	return permanent(fmt.Errorf("target %s refused: not the DR path of source %s (%s under the path mappings)", tgt, src, m))
}

// liveSource is src without its HDFS snapshot segments (a/.snapshot/s/b
// is a/b): the path of the file a snapshot copy is of.
func liveSource(src string) string {
	const seg = "/.snapshot/"
	i := strings.Index(src, seg)
	if i < 0 {
		return src
	}
	rest := src[i+len(seg):]
	j := strings.IndexByte(rest, '/')
	if j < 0 {
		return src
	}
	return src[:i] + rest[j:]
}

// Copy carries out one copy task and says how it went. It never panics and
// always returns a completion: COPIED, SKIPPED_IDENTICAL, SOURCE_GONE (with
// evidence) or FAILED (with the error).
//
// Confinement comes first: a source not under the source roots or a target
// not under the target roots (another scheme or host, a ".." segment, a
// relative path) completes FAILED, naming the path, before any store is
// asked anything. Attempts is 0 then.
//
// If ctx ends first, the completion is FAILED with an error saying the copy
// was interrupted; a daemon that is stopping should not publish it, and
// should leave the task to be delivered again.
func (e *Engine) Copy(ctx context.Context, task schemas.CopyTask) (c schemas.CopyCompletion) {
	c = schemas.CopyCompletion{
		TaskID: task.TaskID, EventID: task.EventID, Database: task.Database,
		SourceURI: task.SourceURI, TargetURI: task.TargetURI,
		Length: -1, Started: e.now(),
	}
	e.m.inFlight.Inc()
	defer func() {
		if p := recover(); p != nil {
			c.Status, c.Length, c.CRC32C = schemas.StatusFailed, -1, nil
			c.Error = fmt.Sprintf("internal error copying %s to %s: %v", task.SourceURI, task.TargetURI, p)
		}
		c.Finished = e.now()
		e.m.inFlight.Dec()
		e.m.completed(&c)
	}()
	fail := func(err error) {
		c.Status, c.Length, c.CRC32C, c.Error = schemas.StatusFailed, -1, nil, err.Error()
	}

	src, err := confine("source", task.SourceURI, e.src)
	if err != nil {
		fail(err)
		return c
	}
	tgt, err := confine("target", task.TargetURI, e.tgt)
	if err != nil {
		fail(err)
		return c
	}
	if err := e.mapped(src, tgt, task.Subdir); err != nil {
		fail(err)
		return c
	}
	sum, err := ParseEventChecksum(task.Checksum)
	if err != nil {
		fail(fmt.Errorf("task %s for %s: %w", task.TaskID, task.SourceURI, err))
		return c
	}

	for attempt := 1; ; attempt++ {
		c.Attempts = int32(attempt)
		res, err := e.attempt(ctx, task, src, tgt, sum)
		if err == nil {
			c.Status, c.Length, c.CRC32C = res.status, res.length, res.crc
			c.Verification, c.CopiedFrom, c.Evidence = res.verification, res.copiedFrom, res.evidence
			return c
		}
		if ctx.Err() != nil {
			fail(fmt.Errorf("copy of %s to %s interrupted: %w (last error: %v)", src, tgt, ctx.Err(), err))
			return c
		}
		if !retryable(err) {
			fail(err)
			return c
		}
		if attempt > e.cfg.Retries {
			fail(fmt.Errorf("after %d attempts: %w", attempt, err))
			return c
		}
		e.m.retries.Inc()
		wait := backoff(attempt, e.initial, e.maxWait)
		e.cfg.Logger.Warn("copy attempt failed; retrying", "task", task.TaskID, "source", src, "target", tgt,
			"attempt", attempt, "of", e.cfg.Retries+1, "err", err, "retry_in", wait)
		if serr := e.sleep(ctx, wait); serr != nil {
			fail(fmt.Errorf("copy of %s to %s interrupted: %w (last error: %v)", src, tgt, serr, err))
			return c
		}
	}
}

// result is the outcome of a successful attempt.
type result struct {
	status       schemas.CopyStatus
	length       int64
	crc          *uint32
	verification string
	copiedFrom   string
	evidence     string
}

// candidate is a file observed as a possible origin of the bytes, or the
// target.
type candidate struct {
	loc  string // normalised location
	fs   fs.FS
	path string // as the FS takes it
	FileState
	match     Match
	matchHow  string // how match was found ("crc32c", "filechecksum")
	crcSource string // fs.Checksum.Source
	info      fs.FileInfo
}

// attempt observes, decides and acts once. An error is retried or not by
// its kind (retryable); a result is final.
func (e *Engine) attempt(ctx context.Context, task schemas.CopyTask, src, tgt string, sum EventChecksum) (result, error) {
	if task.Rewrite != "" {
		return e.attemptRewrite(ctx, task, src, tgt)
	}
	from, err := e.observe(ctx, src, sum, true)
	if err != nil {
		return result{}, err
	}
	source := from
	to, err := e.observe(ctx, tgt, sum, false)
	if err != nil {
		return result{}, err
	}
	obs := Observation{
		Origin: FromSource, Source: from.FileState, SourceMatch: from.match,
		Target: to.FileState, TargetMatch: to.match,
		CMAvailable: task.CMRoot != "" && sum.Hex != "",
	}
	_, canSnap := source.fs.(SnapshotFinder)
	obs.SnapshotsAvailable = canSnap && sum.Hex != ""
	d := Decide(obs)
	evidence := []string{"source " + from.describe(sum)}
	if d.Action == LookInCMRoot {
		cmLoc := CMPath(task.CMRoot, path.Base(task.SourceURI), strings.TrimSpace(task.Checksum))
		cmLoc, err := confine("change-management copy", cmLoc, e.read)
		if err != nil {
			return result{}, fmt.Errorf("source %s: %s; %w", src, d.Reason, err)
		}
		if from, err = e.observe(ctx, cmLoc, sum, true); err != nil {
			return result{}, err
		}
		obs.Origin, obs.Source, obs.SourceMatch = FromCMRoot, from.FileState, from.match
		d = Decide(obs)
		evidence = append(evidence, "change-management copy "+from.describe(sum))
	} else if !from.Exists || from.match == MatchNo {
		switch {
		case task.CMRoot == "":
			evidence = append(evidence, "change-management copy: the event names no change-management root")
		case sum.Hex == "":
			evidence = append(evidence, "change-management copy: the event logged no checksum to find it by")
		}
	}

	if d.Action == LookInSnapshots {
		from, d, evidence, err = e.lookInSnapshots(ctx, source, obs, sum, evidence)
		if err != nil {
			return result{}, err
		}
	} else if d.Action == SourceGone {
		switch {
		case !canSnap:
			evidence = append(evidence, "snapshots: the source's store keeps none to look in")
		case sum.Hex == "":
			evidence = append(evidence, "snapshots: the event logged no checksum to check a snapshot copy by")
		}
	}

	var dirs dirsDone
	if d.Action == SkipIdentical || d.Action == Copy {
		// The directories first, so that a file never lies in a
		// directory without its source directory's metadata.
		if dirs, err = e.keepDirs(ctx, src, tgt, to); err != nil {
			return result{}, err
		}
	}
	switch d.Action {
	case SkipIdentical:
		repaired, err := e.repairMeta(ctx, from, to)
		if err != nil {
			return result{}, err
		}
		if err := remark(ctx, to, task); err != nil {
			return result{}, err
		}
		r := result{status: schemas.StatusSkippedIdentical, length: to.Size,
			verification: "crc32c:" + skipChecks(from, to) + " (target already identical: " + d.Reason + "; nothing moved)" +
				repaired + dirs.describe()}
		if to.HasCRC {
			r.crc = &to.CRC32C
		}
		return r, nil
	case SourceGone:
		return result{status: schemas.StatusSourceGone, length: -1, evidence: strings.Join(evidence, "; ")}, nil
	case Fail:
		return result{}, permanent(fmt.Errorf("copy %s to %s: %s", from.loc, tgt, d.Reason))
	case Copy:
		r, err := e.transfer(ctx, task, from, to, sum)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, iofs.ErrNotExist) {
			return result{}, &vanishedError{err}
		}
		if err != nil {
			return result{}, err
		}
		r.verification += dirs.describe()
		if from.loc != src {
			r.copiedFrom = from.loc
			r.evidence = strings.Join(evidence, "; ")
		}
		return r, nil
	}
	return result{}, fmt.Errorf("copy %s to %s: unexpected decision %v", src, tgt, d.Action)
}

// lookInSnapshots looks for the event's bytes in the snapshots of the
// source's directories, newest first, and returns the first candidate
// that Decide copies or skips, with that decision. When there is none the
// decision is SourceGone. Every candidate checked is named in the evidence.
//
// Invariant: a snapshot copy is read only if its normalised location lies
// under the source roots (".snapshot" is an ordinary segment to the root
// check), and copied only if its checksum equals the event's (Decide).
func (e *Engine) lookInSnapshots(ctx context.Context, source candidate, obs Observation, sum EventChecksum,
	evidence []string) (candidate, Decision, []string, error) {
	gone := Decision{SourceGone, "no snapshot holds the event's bytes"}
	cands, err := source.fs.(SnapshotFinder).SnapshotCandidates(ctx, source.path)
	if err != nil {
		if retryable(err) {
			return source, Decision{}, nil, err
		}
		return source, gone, append(evidence, fmt.Sprintf("snapshots: could not be listed: %v", err)), nil
	}
	if len(cands) == 0 {
		return source, gone, append(evidence, "snapshots: none holds "+source.loc), nil
	}
	obs.Origin = FromSnapshot
	for _, cand := range cands {
		loc, err := confine("snapshot copy", cand, e.src)
		if err != nil {
			evidence = append(evidence, err.Error()) // names cand and why
			continue
		}
		c, err := e.observe(ctx, loc, sum, true)
		if err != nil {
			return source, Decision{}, nil, err
		}
		obs.Source, obs.SourceMatch = c.FileState, c.match
		d := Decide(obs)
		desc := "snapshot copy " + c.describe(sum)
		if d.Action == Copy || d.Action == SkipIdentical {
			return c, d, append(evidence, desc), nil
		}
		evidence = append(evidence, desc+" (not used: "+d.Reason+")")
	}
	return source, gone, evidence, nil
}

// skipChecks names what a SKIPPED_IDENTICAL was decided on.
func skipChecks(from, to candidate) string {
	switch {
	case to.match == MatchYes && from.HasCRC && from.CRC32C == to.CRC32C:
		return "source+event+target"
	case to.match == MatchYes:
		return "event+target"
	}
	return "source+target"
}

// observe describes the file at loc. withHex: ask a FileChecksummer too
// (sources and change-management copies; a target lives on another cluster,
// whose MD5-of-MD5 checksums are not comparable with the event's).
func (e *Engine) observe(ctx context.Context, loc string, sum EventChecksum, withHex bool) (candidate, error) {
	f, p, err := e.r.Split(loc)
	if err != nil {
		return candidate{}, permanent(fmt.Errorf("no store for %s: %w", loc, err))
	}
	c := candidate{loc: loc, fs: f, path: p}
	fi, err := f.Stat(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	c.Exists, c.IsDir, c.IsSymlink, c.Size, c.info = true, fi.IsDir, fi.IsSymlink, fi.Size, fi
	if c.IsDir || c.IsSymlink {
		return c, nil
	}
	cs, ok, err := f.Checksum(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return candidate{loc: loc, fs: f, path: p}, nil // gone since the Stat
	}
	if err != nil {
		return c, err
	}
	if ok {
		c.CRC32C, c.HasCRC, c.crcSource = cs.CRC32C, true, cs.Source
	}
	if c.match = sum.matchCRC(c.CRC32C, c.HasCRC); c.match != MatchUnknown {
		c.matchHow = "crc32c"
		return c, nil
	}
	if fc, isFC := f.(FileChecksummer); withHex && isFC && sum.Hex != "" && !sum.IsCRC32C {
		h, ok, err := fc.FileChecksum(ctx, p)
		if errors.Is(err, fs.ErrNotExist) {
			return candidate{loc: loc, fs: f, path: p}, nil
		}
		if err != nil {
			return c, err
		}
		if c.match = sum.matchHex(h, ok); c.match != MatchUnknown {
			c.matchHow = "filechecksum " + strings.ToLower(h)
		}
	}
	return c, nil
}

// describe says what was found of c, for evidence.
func (c candidate) describe(sum EventChecksum) string {
	switch {
	case !c.Exists:
		return c.loc + ": does not exist"
	case c.IsDir:
		return c.loc + ": is a directory"
	case c.IsSymlink:
		return c.loc + ": is a symbolic link"
	}
	s := fmt.Sprintf("%s: %d bytes", c.loc, c.Size)
	if c.HasCRC {
		s += fmt.Sprintf(", crc32c %08x", c.CRC32C)
	}
	switch {
	case sum.Hex == "":
		s += ", no event checksum"
	case c.match == MatchUnknown:
		s += ", event checksum " + sum.Hex + " not comparable"
	default:
		s += fmt.Sprintf(", %s %s the event checksum %s", c.matchHow, c.match, sum.Hex)
	}
	return s
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// transfer copies from to the target, computing the CRC32C on the way,
// and verifies it: as ranges in parallel when the file is larger than the
// split size and the target store can take ranges (transferSplit), else
// as one stream (transferStream).
//
// Invariant (atomic publish): the target's Writer is committed only after
// the bytes copied were verified against every checksum of the origin
// that could be had (its store's CRC32C, the event's CRC32C, its length);
// on any failure the write is aborted and the target is as it was.
func (e *Engine) transfer(ctx context.Context, task schemas.CopyTask, from, to candidate, sum EventChecksum) (result, error) {
	if sp, ok := to.fs.(fs.Splitter); ok && e.cfg.SplitSize > 0 && from.Size > e.cfg.SplitSize {
		r, split, err := e.transferSplit(ctx, task, from, to, sum, sp)
		if split {
			return r, err
		}
	}
	return e.transferStream(ctx, task, from, to, sum)
}

// transferStream streams from to the target through one reader and one
// writer.
func (e *Engine) transferStream(ctx context.Context, task schemas.CopyTask, from, to candidate, sum EventChecksum) (result, error) {
	rc, err := from.fs.Open(ctx, from.path, 0, -1)
	if err != nil {
		return result{}, err
	}
	defer rc.Close()
	var checks []string
	var n int64
	w, crc, err := e.writeCommit(ctx, task, to, from.Size, func(w fs.Writer) (uint32, error) {
		if err := e.cfg.Preserve.give(from.info, to.loc, w); err != nil {
			return 0, err
		}
		h := crc32.New(castagnoli)
		bp := e.bufs.Get().(*[]byte)
		mr := &meteredReader{ctx: ctx, r: rc, t: e.thr, count: e.m.moved}
		e.streams.Add(1)
		var err error
		n, err = io.CopyBuffer(io.MultiWriter(w, h), mr, *bp)
		e.streams.Add(-1)
		e.bufs.Put(bp)
		if err != nil {
			return 0, fmt.Errorf("copy %s to %s: %w", from.loc, to.loc, err)
		}
		crc := h.Sum32()
		checks, err = preCommitChecks(from, sum, n, crc)
		return crc, err
	})
	if err != nil {
		return result{}, err
	}
	return e.postCommit(ctx, from, to, sum, n, crc, checks, w)
}

// writeCommit writes the target to through a staging file: it creates the
// write (recorded in the StagingLog, marked with the task's event), has
// fill write the bytes and return their CRC32C, and commits. Any failure
// aborts the write (the target is as it was) and its staging record is
// ended once the write was committed or aborted.
func (e *Engine) writeCommit(ctx context.Context, task schemas.CopyTask, to candidate, size int64,
	fill func(w fs.Writer) (uint32, error)) (fs.Writer, uint32, error) {
	w, err := e.create(ctx, task, to, size)
	if err != nil {
		return nil, 0, err
	}
	markEvent(w, task)
	staging := w.Staging()
	done := false // committed, or aborted
	defer func() {
		if !done {
			done = abortWrite(ctx, w) == nil
		}
		if done && e.cfg.Staging != nil {
			// The restart sweep cleans anything this misses.
			_ = e.cfg.Staging.End(context.WithoutCancel(ctx), task.TaskID, to.loc, staging)
		}
	}()
	crc, err := fill(w)
	if err != nil {
		return nil, 0, err
	}
	if err := w.Commit(ctx, crc); err != nil {
		return nil, 0, fmt.Errorf("commit %s: %w", to.loc, err)
	}
	done = true
	return w, crc, nil
}

// targetChecksum is the target's checksum after a commit: what the store
// checked while committing (Verified), else what it reports now; ok is
// false when it gives none.
func targetChecksum(ctx context.Context, to candidate, w interface{ Verified() (fs.Checksum, bool) }) (fs.Checksum, bool, error) {
	if ts, ok := w.Verified(); ok {
		return ts, true, nil
	}
	return to.fs.Checksum(ctx, to.path)
}

// markEvent has a writer that can mark the file it writes with the
// task's event (fs.EventMarkAttr) do so: a prune of an earlier event on
// DR then keeps it, even before the applier has read this completion.
func markEvent(w any, task schemas.CopyTask) {
	if m, ok := w.(fs.EventMarkWriter); ok {
		m.MarkEvent(task.EventID)
	}
}

// remark marks a target found identical with the task's event when its
// mark is older (or it has none): it may be a file an earlier event's
// copy wrote under the same name, which that event's prune would remove.
func remark(ctx context.Context, to candidate, task schemas.CopyTask) error {
	m, ok := to.fs.(fs.EventMarks)
	if !ok || task.EventID <= 0 {
		return nil
	}
	id, marked, err := m.EventMark(ctx, to.path)
	if err != nil || marked && id >= task.EventID {
		return err
	}
	return m.SetEventMark(ctx, to.path, task.EventID)
}

// create starts the write of to, recorded in the StagingLog (if any) so
// that a crash cannot leak its staging file. A store that names its
// staging file first (fs.StagedCreator) has it recorded before it is
// created; any other has it recorded once created, before a byte is
// written.
func (e *Engine) create(ctx context.Context, task schemas.CopyTask, to candidate, size int64) (fs.Writer, error) {
	sc, named := to.fs.(fs.StagedCreator)
	if e.cfg.Staging == nil || !named {
		w, err := to.fs.Create(ctx, to.path, size)
		if err != nil || e.cfg.Staging == nil {
			return w, err
		}
		if err := e.cfg.Staging.Begin(ctx, task.TaskID, to.loc, w.Staging()); err != nil {
			abortWrite(ctx, w)
			return nil, fmt.Errorf("record staging %s of %s: %w", w.Staging(), to.loc, err)
		}
		return w, nil
	}
	staging, err := sc.StagingFor(to.path)
	if err != nil {
		return nil, err
	}
	if err := e.cfg.Staging.Begin(ctx, task.TaskID, to.loc, staging); err != nil {
		return nil, fmt.Errorf("record staging %s of %s: %w", staging, to.loc, err)
	}
	w, err := sc.CreateStaged(ctx, to.path, staging, size)
	if err != nil {
		// The staging file may exist (a create that failed late): discard
		// it, and forget it once that worked; else the restart sweep does.
		if to.fs.Discard(context.WithoutCancel(ctx), to.path, staging) == nil {
			_ = e.cfg.Staging.End(context.WithoutCancel(ctx), task.TaskID, to.loc, staging)
		}
		return nil, err
	}
	return w, nil
}

// preCommitChecks checks what was read from the origin, n bytes with CRC32C
// crc, against its length and every checksum of it that could be had, and
// names those checked.
func preCommitChecks(from candidate, sum EventChecksum, n int64, crc uint32) ([]string, error) {
	var checks []string
	if n != from.Size {
		return nil, &mismatchError{fmt.Sprintf("length mismatch: read %d bytes from %s, which had %d when the copy began",
			n, from.loc, from.Size)}
	}
	if from.HasCRC {
		if crc != from.CRC32C {
			return nil, &mismatchError{fmt.Sprintf("CRC32C mismatch: computed %08x streaming %s, its store reports %08x (%s)",
				crc, from.loc, from.CRC32C, from.crcSource)}
		}
		checks = append(checks, "source")
	}
	if sum.IsCRC32C {
		if crc != sum.CRC32C {
			return nil, &mismatchError{fmt.Sprintf("CRC32C mismatch: computed %08x streaming %s, the event logged %08x",
				crc, from.loc, sum.CRC32C)}
		}
		checks = append(checks, "event")
	}
	return checks, nil
}

// postCommit verifies a committed target and makes the attempt's result.
//
// After the commit the file is visible: a target that turns out wrong is
// removed, so no wrong bytes stay where a reader may take them. Stores
// that checked the published bytes themselves while committing (HDFS, S3)
// say so through Verified; asking them again would only repeat that I/O.
func (e *Engine) postCommit(ctx context.Context, from, to candidate, sum EventChecksum, n int64, crc uint32,
	checks []string, w interface{ Verified() (fs.Checksum, bool) }) (result, error) {
	ts, tok, err := targetChecksum(ctx, to, w)
	if err != nil {
		return result{}, err
	}
	if tok {
		if ts.CRC32C != crc {
			return result{}, e.removeBad(ctx, to, fmt.Sprintf("CRC32C mismatch: computed %08x streaming %s, the target store reports %08x (%s) for %s after the commit",
				crc, from.loc, ts.CRC32C, ts.Source, to.loc))
		}
		checks = append(checks, "target")
	}
	var verification string
	if len(checks) > 0 {
		verification = "crc32c:" + strings.Join(checks, "+")
	}
	if !from.HasCRC && !sum.IsCRC32C || !tok {
		var why []string
		if !from.HasCRC && !sum.IsCRC32C {
			why = append(why, "no checksum of the origin could be had")
		}
		if !tok {
			why = append(why, "the target store gives no checksum")
		}
		ranges, sampled, err := e.sampleCompare(ctx, from, to, n)
		if err != nil {
			var me *mismatchError
			if errors.As(err, &me) {
				return result{}, e.removeBad(ctx, to, me.msg)
			}
			return result{}, err
		}
		fb := fmt.Sprintf("length+sampled-reread (%d bytes in %d ranges re-read from the target and the origin): %s",
			sampled, ranges, strings.Join(why, ", "))
		if verification != "" {
			verification += "; " + fb
		} else {
			verification = fb
		}
	}
	if from.match == MatchYes && from.matchHow != "crc32c" {
		verification += "; the origin's " + from.matchHow + " equals the event's"
	}
	return result{status: schemas.StatusCopied, length: n, crc: &crc, verification: verification}, nil
}

// transferSplit copies from to the target as the ranges the target store
// plans (fs.Splitter), up to SplitWorkers at once, each read from the
// origin with its own ranged read and checksummed on the way; the file's
// CRC32C is combined from the ranges' and verified as transferStream
// verifies its own. split is false, with nothing written, when the store
// would not take this file in ranges, or found at the commit that it
// cannot join them (the write is then aborted): the caller streams it.
//
// Every staging the write may leave (part files, the upload) is recorded
// before a byte is written, and any failure of one range cancels the
// others and aborts the whole write: nothing is published, no staging is
// left, and the attempt is retried as a whole.
func (e *Engine) transferSplit(ctx context.Context, task schemas.CopyTask, from, to candidate, sum EventChecksum,
	sp fs.Splitter) (r result, split bool, err error) {
	w, ok, err := sp.CreateSplit(ctx, to.path, from.Size, e.cfg.SplitSize)
	if err != nil || !ok {
		return result{}, ok || err != nil, err
	}
	markEvent(w, task)
	if err := e.cfg.Preserve.give(from.info, to.loc, w); err != nil {
		abortSplit(ctx, w)
		return result{}, true, err
	}
	var begun []string
	done := false // committed, or aborted
	defer func() {
		if !done {
			done = abortSplit(ctx, w) == nil
		}
		if done && e.cfg.Staging != nil {
			for _, s := range begun {
				_ = e.cfg.Staging.End(context.WithoutCancel(ctx), task.TaskID, to.loc, s)
			}
		}
	}()
	if e.cfg.Staging != nil {
		for _, s := range w.Stagings() {
			if err := e.cfg.Staging.Begin(ctx, task.TaskID, to.loc, s); err != nil {
				return result{}, true, fmt.Errorf("record staging %s of %s: %w", s, to.loc, err)
			}
			begun = append(begun, s)
		}
	}

	ranges := w.Ranges()
	crcs, most, err := e.copyRanges(ctx, from, to, w, ranges)
	if err != nil {
		return result{}, true, err
	}
	var crc uint32
	var n int64
	for i, rg := range ranges {
		crc = hdfscrc.Combine(crc, crcs[i], rg.Len)
		n += rg.Len
	}
	checks, err := preCommitChecks(from, sum, n, crc)
	if err != nil {
		return result{}, true, err
	}
	if err := w.Commit(ctx, crc); err != nil {
		if errors.Is(err, fs.ErrSplitUnsupported) {
			return result{}, false, nil // aborted by the deferred call
		}
		return result{}, true, fmt.Errorf("commit %s: %w", to.loc, err)
	}
	done = true
	r, err = e.postCommit(ctx, from, to, sum, n, crc, checks, w)
	if err == nil {
		r.verification += fmt.Sprintf("; copied as %d ranges, up to %d at a time, CRC32C combined from theirs",
			len(ranges), most)
	}
	return r, true, err
}

// growInterval is how often a split copy looks for idle streams to take.
const growInterval = 200 * time.Millisecond

// copyRanges copies the ranges of a split write and returns their CRC32Cs
// and the most ranges that ran at once. The first error cancels the other
// ranges and is returned.
//
// How many ranges run at once adapts to the engine's load: a split copy
// starts with one range worker, which copies range after range, and adds
// workers (up to SplitWorkers) only while the engine runs fewer than
// SplitWorkers copy streams in all (whole-file streams and range workers
// alike), checking at every range's end and every growInterval. So one
// large file alone is copied SplitWorkers ranges at a time, while a daemon
// already busy with several files gains no streams from splitting: on a
// machine with few cores more streams than that only compete (see the
// docs/benchmarks.md). The first worker never waits, so a copy always
// progresses.
func (e *Engine) copyRanges(ctx context.Context, from, to candidate, w fs.SplitWriter, ranges []fs.Range) ([]uint32, int, error) {
	crcs := make([]uint32, len(ranges))
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu                  sync.Mutex
		next, running, most int
		firstErr            error
		events              = make(chan struct{}, 1)
		budget              = int64(e.cfg.SplitWorkers)
	)
	signal := func() {
		select {
		case events <- struct{}{}:
		default:
		}
	}
	worker := func() {
		defer func() {
			e.streams.Add(-1)
			mu.Lock()
			running--
			mu.Unlock()
			signal()
		}()
		for {
			mu.Lock()
			if next >= len(ranges) || firstErr != nil {
				mu.Unlock()
				return
			}
			i := next
			next++
			mu.Unlock()
			c, err := e.copyRange(rctx, from, to, w, i, ranges[i], i == len(ranges)-1)
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
				cancel() // the other ranges are wasted work now
			}
			crcs[i] = c
			mu.Unlock()
			signal()
		}
	}
	// grow starts workers while there are ranges no worker has taken and
	// the engine has streams to spare; the first worker unconditionally.
	grow := func() {
		mu.Lock()
		defer mu.Unlock()
		for firstErr == nil && running < e.cfg.SplitWorkers && running < len(ranges)-next &&
			(running == 0 || e.streams.Load() < budget) {
			running++
			most = max(most, running)
			e.streams.Add(1)
			go worker()
		}
	}
	mu.Lock()
	running++
	most = 1
	mu.Unlock()
	e.streams.Add(1)
	go worker()
	tick := time.NewTicker(growInterval)
	defer tick.Stop()
	for {
		select {
		case <-events:
		case <-tick.C:
		}
		mu.Lock()
		r := running
		mu.Unlock()
		if r == 0 {
			break
		}
		grow()
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return crcs, most, firstErr
}

// copyRange copies range i of from into w and returns its CRC32C. The last
// range is read to the origin's end, so an origin that grew since it was
// observed is caught, as a stream would catch it.
func (e *Engine) copyRange(ctx context.Context, from, to candidate, w fs.SplitWriter, i int, rg fs.Range, last bool) (uint32, error) {
	n := rg.Len
	if last {
		n = -1
	}
	rc, err := from.fs.Open(ctx, from.path, rg.Off, n)
	if err != nil {
		return 0, fmt.Errorf("copy %s to %s: range %d: %w", from.loc, to.loc, i, err)
	}
	defer rc.Close()
	h := crc32.New(castagnoli)
	er := &exactReader{r: &meteredReader{ctx: ctx, r: rc, t: e.thr, count: e.m.moved}, h: h, want: rg.Len,
		from: from, rg: rg}
	if err := w.WriteRange(ctx, i, er); err != nil {
		if er.err != nil {
			return 0, er.err
		}
		return 0, fmt.Errorf("copy %s to %s: range %d: %w", from.loc, to.loc, i, err)
	}
	if er.n != rg.Len {
		return 0, &mismatchError{fmt.Sprintf("length mismatch: range %d of %s [%d, +%d): the target store took %d bytes",
			i, from.loc, rg.Off, rg.Len, er.n)}
	}
	return h.Sum32(), nil
}

// exactReader passes on exactly want bytes of a range, hashing them; fewer
// or more is a length mismatch, which it also keeps in err.
type exactReader struct {
	r    io.Reader
	h    io.Writer
	want int64
	n    int64
	err  error
	from candidate
	rg   fs.Range
}

func (x *exactReader) Read(p []byte) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	k, err := x.r.Read(p)
	if x.n+int64(k) > x.want {
		x.err = &mismatchError{fmt.Sprintf("length mismatch: %s has more than the %d bytes it had when the copy began",
			x.from.loc, x.from.Size)}
		k = int(x.want - x.n)
		err = x.err
	}
	x.h.Write(p[:k])
	x.n += int64(k)
	if err == io.EOF && x.n < x.want {
		x.err = &mismatchError{fmt.Sprintf("length mismatch: read %d bytes of %s from %d, which had %d when the copy began",
			x.n, x.from.loc, x.rg.Off, x.from.Size)}
		err = x.err
	}
	return k, err
}

// abortSplit aborts w even when ctx has ended.
func abortSplit(ctx context.Context, w fs.SplitWriter) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return w.Abort(actx)
}

// abortWrite aborts w even when ctx has ended.
func abortWrite(ctx context.Context, w fs.Writer) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return w.Abort(actx)
}

// removeBad removes a committed target found wrong and returns the
// mismatch (with the removal's failure, if any).
func (e *Engine) removeBad(ctx context.Context, to candidate, msg string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := to.fs.Remove(rctx, to.path); err != nil {
		msg += fmt.Sprintf(" (and removing it failed: %v)", err)
	}
	return &mismatchError{msg}
}

// sampleSpan is the length of one range of a sampled re-read.
const sampleSpan = 64 << 10

// sampleRanges returns the ranges of a file of size bytes that a sampled
// re-read compares: the whole file when it is small, else its first,
// middle and last sampleSpan bytes.
func sampleRanges(size int64) [][2]int64 {
	switch {
	case size <= 0:
		return nil
	case size <= 3*sampleSpan:
		return [][2]int64{{0, size}}
	}
	return [][2]int64{{0, sampleSpan}, {size/2 - sampleSpan/2, sampleSpan}, {size - sampleSpan, sampleSpan}}
}

// sampleCompare checks that the target has n bytes and that sampled ranges
// of it equal the same ranges of the origin. It returns how many ranges
// and bytes it compared.
func (e *Engine) sampleCompare(ctx context.Context, from, to candidate, n int64) (int, int64, error) {
	fi, err := to.fs.Stat(ctx, to.path)
	if err != nil {
		return 0, 0, err
	}
	if fi.Size != n {
		return 0, 0, &mismatchError{fmt.Sprintf("length mismatch: wrote %d bytes to %s, which has %d after the commit", n, to.loc, fi.Size)}
	}
	var total int64
	rs := sampleRanges(n)
	for _, r := range rs {
		a, err := e.readRange(ctx, from, r[0], r[1])
		if err != nil {
			return 0, 0, err
		}
		b, err := e.readRange(ctx, to, r[0], r[1])
		if err != nil {
			return 0, 0, err
		}
		if !bytes.Equal(a, b) {
			i := 0
			for i < len(a) && i < len(b) && a[i] == b[i] {
				i++
			}
			return 0, 0, &mismatchError{fmt.Sprintf("sampled re-read mismatch: byte %d of %s differs from %s", r[0]+int64(i), to.loc, from.loc)}
		}
		total += r[1]
	}
	return len(rs), total, nil
}

// readRange reads n bytes of c from off, through the throttle.
func (e *Engine) readRange(ctx context.Context, c candidate, off, n int64) ([]byte, error) {
	rc, err := c.fs.Open(ctx, c.path, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, n)
	if _, err := io.ReadFull(&meteredReader{ctx: ctx, r: rc, t: e.thr, count: e.m.moved}, buf); err != nil {
		return nil, fmt.Errorf("re-read %d bytes of %s at %d: %w", n, c.loc, off, err)
	}
	return buf, nil
}
