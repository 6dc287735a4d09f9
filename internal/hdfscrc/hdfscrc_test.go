package hdfscrc

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/hivedr/hivedr/internal/webhdfs"
)

// fakeDatanode answers OP_BLOCK_CHECKSUM for the blocks of a fakeCluster,
// behaving as its mode says: "ok", "close" (hang up without answering),
// "error" (answer Status ERROR) or "hang" (never answer).
type fakeDatanode struct {
	t       *testing.T
	ln      net.Listener
	mode    string
	cluster *fakeCluster
	calls   atomic.Int64
}

func (d *fakeDatanode) port() int { return d.ln.Addr().(*net.TCPAddr).Port }

func (d *fakeDatanode) serve() {
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			return
		}
		go d.handle(conn)
	}
}

func (d *fakeDatanode) handle(conn net.Conn) {
	defer conn.Close()
	d.calls.Add(1)
	b, typ, err := readBlockChecksumRequest(bufio.NewReader(conn))
	if err != nil {
		d.t.Errorf("datanode %s: bad request: %v", d.ln.Addr(), err)
		return
	}
	var resp []byte
	switch d.mode {
	case "close":
		return
	case "hang":
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		conn.Read(make([]byte, 1)) // until the client hangs up
		return
	case "error":
		resp = marshalBlockOpResponse(1, "Replica not found for "+strconv.FormatUint(b.BlockID, 10), nil)
	default:
		data, gs, ok := d.cluster.block(b.BlockID)
		switch {
		case !ok || gs != b.GenerationStamp || typ != blockChecksumComposite:
			resp = marshalBlockOpResponse(1, "no such block or unsupported request", nil)
		case b.NumBytes > uint64(len(data)):
			resp = marshalBlockOpResponse(1, "requested more than the replica holds", nil)
		default:
			sum := crc32.Checksum(data[:b.NumBytes], castagnoli)
			resp = marshalBlockOpResponse(0, "", &checksumResponse{
				BytesPerCrc: 512, CrcPerBlock: (b.NumBytes + 511) / 512, BlockChecksum: binary.BigEndian.AppendUint32(nil, sum),
				CrcType: checksumTypeCRC32C, HasCrcType: true, BlockChecksumType: blockChecksumComposite,
			})
		}
	}
	conn.Write(protowire.AppendBytes(nil, resp)) // varint length, then the message
}

// fakeFile is a file of a fakeCluster.
type fakeFile struct {
	data              []byte
	blockSize         int
	underConstruction bool
	datanodes         []*fakeDatanode // every block's replicas, in this order
	firstBlockID      uint64
}

// fakeCluster is a NameNode's WebHDFS GET_BLOCK_LOCATIONS plus DataNodes.
// The NameNode lists at most two blocks per answer, as a real one may
// answer with fewer blocks than the range asked for.
type fakeCluster struct {
	t      *testing.T
	srv    *httptest.Server
	nnGets atomic.Int64

	mu     sync.Mutex
	files  map[string]*fakeFile
	nextID uint64
}

func newFakeCluster(t *testing.T) *fakeCluster {
	c := &fakeCluster{t: t, files: map[string]*fakeFile{}, nextID: 1 << 30}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serveNameNode))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *fakeCluster) datanode(mode string) *fakeDatanode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	d := &fakeDatanode{t: c.t, ln: ln, mode: mode, cluster: c}
	c.t.Cleanup(func() { ln.Close() })
	go d.serve()
	return d
}

func (c *fakeCluster) addFile(path string, f *fakeFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.firstBlockID = c.nextID
	c.nextID += uint64(len(f.data)/f.blockSize + 1)
	c.files[path] = f
}

// block returns the bytes and generation stamp of block id.
func (c *fakeCluster) block(id uint64) ([]byte, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.files {
		i := int(id - f.firstBlockID)
		if id >= f.firstBlockID && i*f.blockSize < len(f.data) {
			end := min((i+1)*f.blockSize, len(f.data))
			return f.data[i*f.blockSize : end], 1000 + id, true
		}
	}
	return nil, 0, false
}

func (c *fakeCluster) serveNameNode(w http.ResponseWriter, r *http.Request) {
	c.nnGets.Add(1)
	q := r.URL.Query()
	path := strings.TrimPrefix(r.URL.Path, "/webhdfs/v1")
	if q.Get("op") != "GET_BLOCK_LOCATIONS" || q.Get("user.name") != "hivedr" {
		http.Error(w, "unexpected request "+r.URL.String(), http.StatusBadRequest)
		return
	}
	offset, err1 := strconv.ParseInt(q.Get("offset"), 10, 64)
	length, err2 := strconv.ParseInt(q.Get("length"), 10, 64)
	if err1 != nil || err2 != nil || offset < 0 || length < 0 {
		http.Error(w, "bad offset or length", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	f, ok := c.files[path]
	c.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"RemoteException":{"exception":"FileNotFoundException","javaClassName":"java.io.FileNotFoundException","message":"File does not exist: ` + path + `"}}`))
		return
	}
	type block map[string]any
	var blocks []block
	for i := 0; i*f.blockSize < len(f.data) && len(blocks) < 2; i++ {
		start, end := int64(i*f.blockSize), int64(min((i+1)*f.blockSize, len(f.data)))
		if end <= offset || start >= offset+length {
			continue
		}
		var locs []map[string]any
		for _, d := range f.datanodes {
			locs = append(locs, map[string]any{"ipAddr": "127.0.0.1", "hostName": "localhost", "xferPort": d.port(), "name": d.ln.Addr().String()})
		}
		id := f.firstBlockID + uint64(i)
		blocks = append(blocks, block{
			"block":       map[string]any{"blockId": id, "blockPoolId": "BP-test", "generationStamp": 1000 + id, "numBytes": end - start},
			"blockToken":  map[string]any{"urlString": "AAAAAA"},
			"isCorrupt":   false,
			"locations":   locs,
			"startOffset": start,
		})
	}
	if blocks == nil {
		blocks = []block{}
	}
	json.NewEncoder(w).Encode(map[string]any{"LocatedBlocks": map[string]any{
		"fileLength":          len(f.data),
		"isUnderConstruction": f.underConstruction,
		"isLastBlockComplete": !f.underConstruction && len(f.data) > 0,
		"locatedBlocks":       blocks,
	}})
}

func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestFileCRC32C(t *testing.T) {
	ctx := context.Background()
	fc := newFakeCluster(t)
	dead, ok, failing := fc.datanode("close"), fc.datanode("ok"), fc.datanode("error")
	cl := New(fc.srv.URL, "hivedr", nil)

	multi := randomData(5*1000+17, 1)
	fc.addFile("/wh/multi", &fakeFile{data: multi, blockSize: 1000, datanodes: []*fakeDatanode{dead, ok}})
	crc, n, err := cl.FileCRC32C(ctx, "/wh/multi")
	if err != nil {
		t.Fatal(err)
	}
	if want := crc32.Checksum(multi, castagnoli); crc != want || n != int64(len(multi)) {
		t.Errorf("multi-block file: CRC %08x length %d, want %08x %d", crc, n, want, len(multi))
	}
	if got := fc.nnGets.Load(); got != 3 {
		t.Errorf("listing 6 blocks two at a time took %d NameNode requests, want 3", got)
	}
	if dead.calls.Load() != 6 || ok.calls.Load() != 6 {
		t.Errorf("datanode calls: dead %d, ok %d; want 6 each (fail over per block)", dead.calls.Load(), ok.calls.Load())
	}

	one := []byte{0x42}
	fc.addFile("/wh/one", &fakeFile{data: one, blockSize: 1000, datanodes: []*fakeDatanode{ok}})
	if crc, n, err := cl.FileCRC32C(ctx, "/wh/one"); err != nil || crc != crc32.Checksum(one, castagnoli) || n != 1 {
		t.Errorf("1-byte file: %08x %d %v", crc, n, err)
	}

	fc.addFile("/wh/empty", &fakeFile{blockSize: 1000, datanodes: []*fakeDatanode{ok}})
	if crc, n, err := cl.FileCRC32C(ctx, "/wh/empty"); err != nil || crc != 0 || n != 0 {
		t.Errorf("empty file: %08x %d %v, want 0 0 nil", crc, n, err)
	}

	fc.addFile("/wh/open", &fakeFile{data: one, blockSize: 1000, underConstruction: true, datanodes: []*fakeDatanode{ok}})
	if _, _, err := cl.FileCRC32C(ctx, "/wh/open"); !errors.Is(err, ErrUnderConstruction) || !strings.Contains(err.Error(), "/wh/open") {
		t.Errorf("file under construction: %v, want ErrUnderConstruction naming the path", err)
	}

	_, _, err = cl.FileCRC32C(ctx, "/wh/missing")
	var re *webhdfs.RemoteError
	if !errors.As(err, &re) || re.Exception != "FileNotFoundException" {
		t.Errorf("missing file: %v, want a FileNotFoundException RemoteError", err)
	}

	if _, _, err := cl.FileCRC32C(ctx, "relative"); err == nil {
		t.Error("relative path accepted")
	}

	fc.addFile("/wh/lost", &fakeFile{data: multi, blockSize: 4096, datanodes: []*fakeDatanode{dead, failing}})
	_, _, err = cl.FileCRC32C(ctx, "/wh/lost")
	if err == nil {
		t.Fatal("file whose datanodes all fail: no error")
	}
	for _, s := range []string{"/wh/lost", "block " + strconv.FormatUint(fc.files["/wh/lost"].firstBlockID, 10),
		"datanode " + dead.ln.Addr().String(), "datanode " + failing.ln.Addr().String(), "ERROR: Replica not found"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestFileCRC32CCancel(t *testing.T) {
	fc := newFakeCluster(t)
	fc.addFile("/wh/slow", &fakeFile{data: []byte("x"), blockSize: 1000, datanodes: []*fakeDatanode{fc.datanode("hang")}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := New(fc.srv.URL, "hivedr", nil).FileCRC32C(ctx, "/wh/slow")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hanging datanode: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to give up", d)
	}
}

func TestFileCRC32CIOTimeout(t *testing.T) {
	fc := newFakeCluster(t)
	fc.addFile("/wh/slow", &fakeFile{data: []byte("x"), blockSize: 1000, datanodes: []*fakeDatanode{fc.datanode("hang")}})
	cl := New(fc.srv.URL, "hivedr", nil)
	cl.IOTimeout = 100 * time.Millisecond
	_, _, err := cl.FileCRC32C(context.Background(), "/wh/slow")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("hanging datanode: %v, want a timeout", err)
	}
}
