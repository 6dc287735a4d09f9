package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/testenv"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// uniq returns a short random suffix so reruns never collide with state a
// previous run left in the (persistent) stack.
func uniq(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestStack is the smoke test of the local real stack: each service is up,
// configured as the pipeline needs it, and behaves as hivedr relies on.
func TestStack(t *testing.T) {
	env := testenv.Require(t)
	t.Run("HiveMetastoreNotificationLog", func(t *testing.T) { testStackHMS(t, env) })
	t.Run("HDFSBlockSizesAndCompositeCRC", func(t *testing.T) { testStackHDFSChecksum(t, env) })
	t.Run("HDFSSnapshotDiff", func(t *testing.T) { testStackHDFSSnapshots(t, env) })
	t.Run("KafkaTransactions", func(t *testing.T) { testStackKafka(t, env) })
	t.Run("S3Checksums", func(t *testing.T) { testStackS3(t, env) })
}

func currentEventID(t *testing.T, ctx context.Context, c *hms.Client) int64 {
	t.Helper()
	id, err := c.GetCurrentNotificationEventId(ctx)
	if err != nil {
		t.Fatalf("get_current_notificationEventId on %s: %v", c.Addr(), err)
	}
	return id.EventId
}

func testStackHMS(t *testing.T, env *testenv.Env) {
	ctx := ctxFor(t, 2*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	db := "stack_" + uniq(t)
	srcStart, drStart := currentEventID(t, ctx, src), currentEventID(t, ctx, dr)

	dbLoc := env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL") + "/" + db + ".db"
	if err := src.CreateDatabase(ctx, &hive_metastore.Database{Name: db, LocationUri: dbLoc, Parameters: map[string]string{}}); err != nil {
		t.Fatalf("create_database %s: %v", db, err)
	}
	tblLoc := dbLoc + "/sales"
	tbl := &hive_metastore.Table{
		TableName: "sales",
		DbName:    db,
		Owner:     "hivedr",
		TableType: "EXTERNAL_TABLE",
		Parameters: map[string]string{
			"EXTERNAL": "TRUE",
		},
		PartitionKeys: []*hive_metastore.FieldSchema{{Name: "dt", Type: "string"}},
		Sd: &hive_metastore.StorageDescriptor{
			Cols:         []*hive_metastore.FieldSchema{{Name: "id", Type: "bigint"}, {Name: "amount", Type: "decimal(10,2)"}},
			Location:     tblLoc,
			InputFormat:  "org.apache.hadoop.mapred.TextInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeInfo: &hive_metastore.SerDeInfo{
				SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
				Parameters:       map[string]string{"field.delim": ","},
			},
			Parameters: map[string]string{},
		},
	}
	if err := src.CreateTable(ctx, tbl); err != nil {
		t.Fatalf("create_table %s.sales: %v", db, err)
	}
	var parts []*hive_metastore.Partition
	for _, dt := range []string{"2026-12-01", "2026-12-02"} {
		sd := *tbl.Sd
		sd.Location = tblLoc + "/dt=" + dt
		parts = append(parts, &hive_metastore.Partition{
			Values: []string{dt}, DbName: db, TableName: "sales", Sd: &sd, Parameters: map[string]string{},
		})
	}
	if n, err := src.AddPartitions(ctx, parts); err != nil || n != 2 {
		t.Fatalf("add_partitions: n=%d err=%v", n, err)
	}

	maxEvents := int32(1000)
	resp, err := src.GetNextNotification(ctx, &hive_metastore.NotificationEventRequest{LastEvent: srcStart, MaxEvents: &maxEvents})
	if err != nil {
		t.Fatalf("get_next_notification after %d: %v", srcStart, err)
	}
	var types []string
	want := srcStart + 1
	for _, ev := range resp.Events {
		// Contiguity of the whole log from our starting point, not only of
		// our own events: this is what the tailer's gap check relies on.
		if ev.EventId != want {
			t.Fatalf("event IDs not contiguous: got %d, want %d", ev.EventId, want)
		}
		want++
		if ev.DbName == nil || *ev.DbName != db {
			continue
		}
		types = append(types, ev.EventType)
		format := ""
		if ev.MessageFormat != nil {
			format = *ev.MessageFormat
		}
		raw, err := hms.MessageJSON(format, ev.Message)
		if err != nil {
			t.Fatalf("event %d %s: %v", ev.EventId, ev.EventType, err)
		}
		var msg map[string]any
		if err := json.Unmarshal(raw, &msg); err != nil {
			t.Fatalf("event %d %s (format %q): message is not JSON: %v", ev.EventId, ev.EventType, format, err)
		}
		if msg["db"] != db {
			t.Errorf("event %d %s: message db = %v, want %s", ev.EventId, ev.EventType, msg["db"], db)
		}
		t.Logf("event %d %s format=%q keys=%v", ev.EventId, ev.EventType, format, mapKeys(msg))
		switch ev.EventType {
		case "CREATE_TABLE":
			if s, _ := msg["tableObjJson"].(string); s == "" {
				t.Errorf("CREATE_TABLE message has no tableObjJson")
			}
		case "ADD_PARTITION":
			if l, _ := msg["partitionListJson"].([]any); len(l) != 2 {
				t.Errorf("ADD_PARTITION message has %d partitions in partitionListJson, want 2", len(l))
			}
		}
	}
	if wantTypes := []string{"CREATE_DATABASE", "CREATE_TABLE", "ADD_PARTITION"}; !slices.Equal(types, wantTypes) {
		t.Fatalf("events of %s = %v, want %v", db, types, wantTypes)
	}

	// The DR metastore answers and its log is its own: the source's
	// changes added nothing to it, its changes add nothing to the source's.
	if got := currentEventID(t, ctx, dr); got != drStart {
		t.Fatalf("DR notification log moved from %d to %d on source changes", drStart, got)
	}
	if _, err := dr.GetDatabase(ctx, db); err == nil {
		t.Fatalf("DR metastore has database %s that was created only on the source", db)
	} else {
		var nso *hive_metastore.NoSuchObjectException
		if !errors.As(err, &nso) {
			t.Fatalf("get_database %s on DR: want NoSuchObjectException, got %v", db, err)
		}
	}
	srcNow := currentEventID(t, ctx, src)
	drDB := db + "_dr"
	if err := dr.CreateDatabase(ctx, &hive_metastore.Database{
		Name: drDB, LocationUri: env.Get(t, "HIVEDR_HMS_DR_EXTERNAL") + "/" + drDB + ".db", Parameters: map[string]string{},
	}); err != nil {
		t.Fatalf("create_database %s on DR: %v", drDB, err)
	}
	if got := currentEventID(t, ctx, dr); got <= drStart {
		t.Fatalf("DR notification log did not move on a DR change: %d", got)
	}
	if got := currentEventID(t, ctx, src); got != srcNow {
		t.Fatalf("source notification log moved from %d to %d on a DR change", srcNow, got)
	}
}

func mapKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// testStackHDFSChecksum checks the block sizes of the two clusters and that
// a file's COMPOSITE-CRC32C, read from the DataNodes (internal/hdfscrc),
// is the CRC32C of its bytes on both, whatever the block size. WebHDFS's
// GETFILECHECKSUM cannot serve here: the DataNode's handler always answers
// MD5-of-MD5-of-CRC32C, which depends on the block size; the test shows
// that too, so a change in Hadoop that fixes it will be noticed.
func testStackHDFSChecksum(t *testing.T, env *testenv.Env) {
	ctx := ctxFor(t, 2*time.Minute)
	data := randomBytes(t, 3<<20)
	wantCRC := crc32.Checksum(data, castagnoli)
	path := "/stacktest/" + uniq(t) + "/three-mib.bin"
	wantBlocks := map[testenv.Site]int{testenv.Source: 3, testenv.DR: 1}
	md5s := map[testenv.Site]string{}
	for _, site := range []testenv.Site{testenv.Source, testenv.DR} {
		testenv.WriteHDFS(t, env.HDFS(t, site), path, data) // the cluster's default block size
		web := env.WebHDFS(t, site)
		blocks, err := web.GetFileBlockLocations(ctx, path)
		if err != nil {
			t.Fatalf("%s: %v", site, err)
		}
		if len(blocks) != wantBlocks[site] {
			t.Errorf("%s: %s has %d blocks, want %d", site, path, len(blocks), wantBlocks[site])
		}
		got, n, err := env.HDFSCRC(t, site).FileCRC32C(ctx, path)
		if err != nil {
			t.Fatalf("%s: %v", site, err)
		}
		if got != wantCRC || n != int64(len(data)) {
			t.Errorf("%s: COMPOSITE-CRC32C = %08x over %d bytes, Go's CRC32C = %08x over %d", site, got, n, wantCRC, len(data))
		}
		sum, err := web.GetFileChecksum(ctx, path)
		if err != nil {
			t.Fatalf("%s: %v", site, err)
		}
		md5s[site] = fmt.Sprintf("%s:%x", sum.Algorithm, sum.Bytes)
	}
	if md5s[testenv.Source] == md5s[testenv.DR] {
		t.Errorf("WebHDFS checksums are equal across block sizes (%s): if WebHDFS now honours COMPOSITE_CRC, use it", md5s[testenv.Source])
	}
}

func testStackHDFSSnapshots(t *testing.T, env *testenv.Env) {
	ctx := ctxFor(t, 2*time.Minute)
	fs, web := env.HDFS(t, testenv.Source), env.WebHDFS(t, testenv.Source)
	dir := "/stacktest/snap-" + uniq(t)
	if err := fs.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	put := func(name string) { testenv.WriteHDFS(t, fs, dir+"/"+name, []byte(name)) }
	put("old")
	if err := web.AllowSnapshot(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := web.CreateSnapshot(ctx, dir, "s1"); err != nil {
		t.Fatal(err)
	}
	put("new")
	if err := fs.Remove(dir + "/old"); err != nil {
		t.Fatal(err)
	}
	if _, err := web.CreateSnapshot(ctx, dir, "s2"); err != nil {
		t.Fatal(err)
	}
	diff, err := web.SnapshotDiff(ctx, dir, "s1", "s2")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range diff {
		got[d.SourcePath] = d.Type
	}
	if got["new"] != "CREATE" || got["old"] != "DELETE" {
		t.Fatalf("snapshot diff s1..s2 = %+v, want CREATE new and DELETE old", diff)
	}
}

func testStackKafka(t *testing.T, env *testenv.Env) {
	ctx := ctxFor(t, 2*time.Minute)
	adm := env.KafkaAdmin(t)
	cfgs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range cfgs {
		for _, c := range rc.Configs {
			if c.Key == "auto.create.topics.enable" && c.MaybeValue() != "false" {
				t.Errorf("broker %s: auto.create.topics.enable=%s, want false", rc.Name, c.MaybeValue())
			}
		}
	}
	topic := "stack-test-" + uniq(t)
	res, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, res.Err)
	}
	t.Cleanup(func() { adm.DeleteTopic(context.Background(), topic) })

	prod := env.Kafka(t, kgo.TransactionalID("stack-test-"+topic), kgo.DefaultProduceTopic(topic))
	txn := func(value string, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", value, err)
		}
		if err := prod.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction of %q: %v", value, err)
		}
	}
	txn("committed", kgo.TryCommit)
	txn("aborted", kgo.TryAbort)
	txn("end", kgo.TryCommit)

	cons := env.Kafka(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var seen []string
	for !slices.Contains(seen, "end") {
		fetches := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read_committed consumer saw only %v before timing out", seen)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fetches.EachRecord(func(r *kgo.Record) { seen = append(seen, string(r.Value)) })
	}
	if want := []string{"committed", "end"}; !slices.Equal(seen, want) {
		t.Fatalf("read_committed consumer saw %v, want %v", seen, want)
	}
}

func testStackS3(t *testing.T, env *testenv.Env) {
	ctx := ctxFor(t, 2*time.Minute)
	cl := env.S3(t)
	bucket := "stack-test-" + uniq(t)
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	data := randomBytes(t, 100<<10)
	var crcb [4]byte
	binary.BigEndian.PutUint32(crcb[:], crc32.Checksum(data, castagnoli))
	want := base64.StdEncoding.EncodeToString(crcb[:])
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("good"), Body: bytes.NewReader(data),
		ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32c,
	}); err != nil {
		t.Fatalf("put with CRC32C: %v", err)
	}
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("good"), ChecksumMode: s3types.ChecksumModeEnabled,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(head.ChecksumCRC32C); got != want {
		t.Fatalf("HeadObject CRC32C = %q, want %q", got, want)
	}
	wrong := crcb
	wrong[0] ^= 0xff
	_, err = cl.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("bad"), Body: bytes.NewReader(data),
		ChecksumCRC32C: aws.String(base64.StdEncoding.EncodeToString(wrong[:])),
	})
	if err == nil {
		t.Fatal("put with a wrong CRC32C was accepted")
	}
	t.Logf("wrong checksum refused: %v", err)
	if _, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("bad")}); err == nil {
		t.Fatal("object with a refused checksum exists")
	}
}
