package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestLocationAliases replicates INSERT OVERWRITEs to a DR cluster that
// the configuration names two ways: filesystems.hdfs[] with the port and
// the path mapping's target without it (hdfs://127.0.0.1/, which Hadoop
// reads as port 8020), and the reverse. The router spells what it lists
// one way, the mapping (the prune's keep list, the completions) the other;
// nothing may be lost: the DR files equal the source's by name, length and
// CRC32C, the overwrites' freshly copied files survive their prune, and
// the files they replaced are gone.
//
// The stack's DR NameNode listens on 127.0.0.1:28020, so a forwarder on
// 127.0.0.1:8020 makes "without the port" reach it, for hivedr and for the
// DR metastore (which creates the directories of what it is given).
func TestLocationAliases(t *testing.T) {
	env := testenv.Require(t)
	drNN, drWeb := env.Get(t, "HIVEDR_HDFS_DR_NAMENODE"), env.Get(t, "HIVEDR_HDFS_DR_HTTP")
	const host = "127.0.0.1"
	alias := net.JoinHostPort(host, location.DefaultHDFSPort)
	fwd := forwardTCP(t, alias, drNN)
	for _, c := range []struct {
		name string
		dr   pipelineConf
	}{
		{"PortInFilesystemsNotInMapping", pipelineConf{
			filesystem: fmt.Sprintf("{namenodes: [%s], webhdfs: %s, user: hivedr}", alias, drWeb),
			target:     "hdfs://" + host + "/",
		}},
		{"PortInMappingNotInFilesystems", pipelineConf{
			filesystem: fmt.Sprintf("{authority: %s, namenodes: [%s], webhdfs: %s, user: hivedr}", host, drNN, drWeb),
			target:     "hdfs://" + alias + "/",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := fwd.bytes.Load()
			db := "la_" + uniq(t)
			p := startAliasPipeline(t, env, c.dr, db)
			orders := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
			accounts := wl.TableSpec{Columns: []string{"id bigint", "owner string"}}
			var overwritten []wl.File
			p.runSteps([]workloadStep{
				{"create database and tables", func(ctx context.Context, s *wl.Source) error {
					return errors.Join(s.CreateDatabase(ctx, db), s.CreateTable(ctx, db, "orders", orders),
						s.CreateTable(ctx, db, "accounts", accounts))
				}},
				{"add partitions with files", func(ctx context.Context, s *wl.Source) error {
					_, err := s.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-01"}, {"2026-12-02"}}, 30)
					return err
				}},
				{"insert", func(ctx context.Context, s *wl.Source) error {
					_, err1 := s.Insert(ctx, db, "orders", []string{"2026-12-01"}, 10)
					_, err2 := s.Insert(ctx, db, "accounts", nil, 20)
					return errors.Join(err1, err2)
				}},
			}, nil)
			p.converge(p.ctx, p.src, p.dr, p.srcFS, p.drFS, 3*time.Minute)
			replaced := p.drFiles(db, "orders", []string{"2026-12-01"})
			replaced = append(replaced, p.drFiles(db, "accounts", nil)...)
			if len(replaced) != 3 {
				t.Fatalf("before the overwrites DR holds %q, want three data files", replaced)
			}

			p.runSteps([]workloadStep{
				{"insert overwrite", func(ctx context.Context, s *wl.Source) error {
					f1, err1 := s.InsertOverwrite(ctx, db, "orders", []string{"2026-12-01"}, 15)
					f2, err2 := s.InsertOverwrite(ctx, db, "accounts", nil, 12)
					overwritten = append(overwritten, f1, f2)
					return errors.Join(err1, err2)
				}},
			}, nil)
			p.converge(p.ctx, p.src, p.dr, p.srcFS, p.drFS, 3*time.Minute)
			eventually(t, time.Minute, "applier group committed to the end of the event topics", func() bool { return p.caughtUp(p.ctx) })

			// Converged means the DR files equal the source's; say so
			// file by file for the overwrites, whose own copies (same
			// names as the files they replace, new bytes) a prune
			// comparing raw strings would delete.
			want := map[string]bool{}
			for _, f := range overwritten {
				target, err := p.mapLocation(f.Location)
				if err != nil {
					t.Fatal(err)
				}
				want[location.MustParse(target).String()] = true
				fi, err := p.drFS.Stat(p.ctx, target)
				if err != nil {
					t.Fatalf("the overwrite's file %s is not on DR at %s: %v", f.Location, target, err)
				}
				sum, ok, err := p.drFS.Checksum(p.ctx, target)
				if err != nil || !ok {
					t.Fatalf("checksum of DR %s: %v (known: %v)", target, err, ok)
				}
				if fi.Size != f.Size || sum.CRC32C != f.CRC32C {
					t.Errorf("DR %s: %d bytes, CRC32C %08x; source %s: %d bytes, %08x", target, fi.Size, sum.CRC32C, f.Location, f.Size, f.CRC32C)
				}
			}
			after := map[string]bool{}
			for _, f := range append(p.drFiles(db, "orders", []string{"2026-12-01"}), p.drFiles(db, "accounts", nil)...) {
				after[f] = true
			}
			if !maps.Equal(after, want) {
				t.Errorf("after the overwrites DR holds %v, want exactly the overwrites' files %v", after, want)
			}
			gone := 0
			for _, f := range replaced {
				if !want[f] {
					gone++
					if after[f] {
						t.Errorf("DR still holds %s, which the overwrite removed at the source (no prune)", f)
					}
				}
			}
			if gone == 0 {
				t.Fatalf("the overwrites replaced no file by another name (%q -> %v): the test cannot tell a prune ran", replaced, want)
			}

			// The DR metastore holds locations spelled as the mapping's
			// target was written.
			tbl, err := p.dr.GetTableReq(p.ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "accounts"})
			if err != nil {
				t.Fatal(err)
			}
			if loc := tbl.Table.Sd.Location; !strings.HasPrefix(loc, c.dr.target) {
				t.Errorf("DR table location %s, want it spelled under the mapping target %s", loc, c.dr.target)
			}
			if fwd.bytes.Load() == before {
				t.Errorf("nothing went through %s: the DR cluster was not reached at the address without its port", alias)
			}
		})
	}
}

// TestLocationAliasesList lists real HDFS and S3 directories through the
// router (what the applier's prune reads) with the directory spelled in
// several ways: the answer is the canonical locations of the files
// directly under it, never its subdirectories', a sibling's sharing its
// name as a prefix, directory markers or staging files; Remove takes any
// spelling.
func TestLocationAliasesList(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 3*time.Minute)
	u := uniq(t)
	drNN := env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	bucket := "la-list-" + u
	r, err := fs.NewRouter(fs.Config{
		HDFS: []fs.HDFSConfig{{Authority: "127.0.0.1", NameNodes: []string{drNN}, WebHDFS: env.Get(t, "HIVEDR_HDFS_DR_HTTP"), User: "hivedr"}},
		S3: []fs.S3Config{{Endpoint: env.Get(t, "HIVEDR_S3_ENDPOINT"), Region: env.Get(t, "HIVEDR_S3_REGION"),
			AccessKey: env.Get(t, "HIVEDR_S3_ACCESS_KEY"), SecretKey: env.Get(t, "HIVEDR_S3_SECRET_KEY"), PathStyle: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	staging := ".b.hivedr-0123456789abcdef.staging"

	// HDFS: the cluster is configured as 127.0.0.1 (port 8020 implied) and
	// reached at the stack's NameNode; locations say hdfs://127.0.0.1/...
	// or hdfs://127.0.0.1:8020/...
	native := env.HDFS(t, testenv.DR)
	dir := "/lalist/" + u
	t.Cleanup(func() { native.RemoveAll(dir) })
	for _, p := range []string{"d/a", "d/b", "d/sub/c", "d/" + staging, "dx/e"} {
		testenv.WriteHDFS(t, native, dir+"/"+p, []byte(p))
	}
	// S3: bucket names are lower case; keys as written.
	client := env.S3(t)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	t.Cleanup(func() { emptyAndDeleteBucket(client, bucket) })
	for _, k := range []string{"w/d/", "w/d/a", "w/d/b", "w/d/sub/c", "w/d/" + staging, "w/dx/e"} {
		body := k
		if strings.HasSuffix(k, "/") {
			body = "" // a directory marker holds nothing
		}
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(k), Body: strings.NewReader(body)}); err != nil {
			t.Fatalf("put s3://%s/%s: %v", bucket, k, err)
		}
	}

	hdfsWant := []string{"hdfs://127.0.0.1:8020" + dir + "/d/a", "hdfs://127.0.0.1:8020" + dir + "/d/b"}
	s3Want := []string{"s3://" + bucket + "/w/d/a", "s3://" + bucket + "/w/d/b"}
	for spelled, want := range map[string][]string{
		"hdfs://127.0.0.1" + dir + "/d":              hdfsWant,
		"HDFS://127.0.0.1:8020" + dir + "//d/":       hdfsWant,
		"hdfs://127.0.0.1:08020" + dir + "/d":        hdfsWant,
		"s3://" + bucket + "/w/d":                    s3Want,
		"s3a://" + bucket + "/w/d/":                  s3Want,
		"S3N://" + strings.ToUpper(bucket) + "/w//d": s3Want,
		"hdfs://127.0.0.1" + dir + "/gone":           nil,
		"s3a://" + bucket + "/w/gone":                nil,
	} {
		got, err := r.List(ctx, spelled)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("List(%s) = %q, %v; want %q", spelled, got, err, want)
		}
	}
	if got, err := r.List(ctx, "hdfs://127.0.0.1:28020"+dir+"/d"); err == nil {
		t.Errorf("List on an unconfigured authority = %q, want an error", got)
	}

	for _, loc := range []string{"hdfs://127.0.0.1" + dir + "/d/a", "s3a://" + bucket + "/w/d/a"} {
		if err := r.Remove(ctx, loc); err != nil {
			t.Fatalf("Remove(%s): %v", loc, err)
		}
	}
	for spelled, want := range map[string][]string{
		"hdfs://127.0.0.1:8020" + dir + "/d": hdfsWant[1:],
		"s3://" + bucket + "/w/d":            s3Want[1:],
	} {
		if got, err := r.List(ctx, spelled); err != nil || !slices.Equal(got, want) {
			t.Errorf("after Remove, List(%s) = %q, %v; want %q", spelled, got, err, want)
		}
	}
}

// startAliasPipeline starts tail, copyd and apply on db with the DR side
// configured as dr, from the source log's current head. Its drFS reads DR
// locations in any spelling of the aliased cluster.
func startAliasPipeline(t *testing.T, env *testenv.Env, dr pipelineConf, db string) *pipelineTest {
	t.Helper()
	pt := &pipelineTest{ctx: ctxFor(t, 5*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, _ = pipelineFS(t, env)
	drFS, err := fs.NewHDFS(fs.HDFSConfig{Authority: "127.0.0.1", NameNodes: []string{env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")},
		WebHDFS: env.Get(t, "HIVEDR_HDFS_DR_HTTP"), User: "hivedr"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drFS.Close() })
	pt.drFS = drFS
	// Dropped before the forwarder closes (cleanups run last first): the
	// shared DR metastore keeps no object at an address nothing serves.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pt.dr.DropDatabase(ctx, db, false, true); err != nil {
			t.Logf("drop DR database %s: %v", db, err)
		}
	})
	pt.pipeline = newPipeline(t, env, []string{db}, currentEventID(t, pt.ctx, pt.src), func(d *pipelineConf) { d.filesystem, d.target = dr.filesystem, dr.target })
	pt.startAll()
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	return pt
}

// drFiles returns the canonical DR locations of the data files of a table
// (vals nil) or partition, as the DR metastore locates it.
func (pt *pipelineTest) drFiles(db, table string, vals []string) []string {
	pt.t.Helper()
	var dir string
	if vals == nil {
		tbl, err := pt.dr.GetTableReq(pt.ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: table})
		if err != nil {
			pt.t.Fatal(err)
		}
		dir = tbl.Table.Sd.Location
	} else {
		part, err := pt.dr.GetPartition(pt.ctx, db, table, vals)
		if err != nil {
			pt.t.Fatal(err)
		}
		dir = part.Sd.Location
	}
	var out []string
	err := pt.drFS.Walk(pt.ctx, dir, func(loc string, _ int64) error {
		if b := location.MustParse(loc).Base(); !strings.HasPrefix(b, ".") && !strings.HasPrefix(b, "_") {
			out = append(out, loc)
		}
		return nil
	})
	if err != nil {
		pt.t.Fatalf("list DR %s: %v", dir, err)
	}
	return out
}

// tcpForwarder accepts TCP connections on one address and pipes each to
// another.
type tcpForwarder struct {
	ln    net.Listener
	to    string
	bytes atomic.Int64 // forwarded, both ways

	mu     sync.Mutex
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// forwardTCP forwards from to to until the test ends. It fails the test,
// saying why, if from is taken.
func forwardTCP(t *testing.T, from, to string) *tcpForwarder {
	t.Helper()
	ln, err := net.Listen("tcp", from)
	if err != nil {
		t.Fatalf("listen on %s: %v\nthis test forwards %s (HDFS's default NameNode port, what a location without a port means) "+
			"to the DR NameNode %s; free %s and run it again", from, err, from, to, from)
	}
	f := &tcpForwarder{ln: ln, to: to}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.close)
	return f
}

func (f *tcpForwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

// pipe copies both ways between c and a new connection to f.to until
// either side ends, then closes both.
func (f *tcpForwarder) pipe(c net.Conn) {
	defer f.wg.Done()
	up, err := net.DialTimeout("tcp", f.to, 10*time.Second)
	if err != nil {
		c.Close()
		return
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	f.conns = append(f.conns, c, up)
	f.mu.Unlock()
	done := make(chan struct{}, 2)
	copyCounting := func(dst, src net.Conn) {
		io.Copy(countingWriter{dst, &f.bytes}, src)
		done <- struct{}{}
	}
	go copyCounting(up, c)
	go copyCounting(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
}

func (f *tcpForwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// countingWriter adds the bytes written through it to n as they go.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
