// Package webhdfs is a small client for the WebHDFS REST API, for the
// operations the native HDFS client (colinmarc/hdfs) lacks: file checksums
// (GETFILECHECKSUM: the MD5-of-MD5-of-CRC32C form the metastore logs when
// change management is on; the DataNode handler answers that form whatever
// dfs.checksum.combine.mode says, so COMPOSITE-CRC32Cs come from
// internal/hdfscrc), snapshots and snapshot lists and diffs, block
// locations (which internal/hdfscrc asks the DataNodes about), CONCAT, and
// modification times to the millisecond (SETTIMES).
package webhdfs

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// Client talks to one NameNode's HTTP endpoint. It is safe for concurrent use.
type Client struct {
	base string // http://host:port
	user string
	hc   *http.Client
}

// New returns a client for the NameNode HTTP address addr (host:port, or a
// URL: https://host:port for a cluster with dfs.http.policy HTTPS_ONLY),
// acting as user (sent as user.name; simple authentication). A nil hc means
// http.DefaultClient. For a kerberized cluster user is empty (no user.name
// is sent: the NameNode refuses one that differs from the authenticated
// principal) and hc authenticates with SPNEGO (krb.Transport).
func New(addr, user string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{base: strings.TrimRight(base, "/"), user: user, hc: hc}
}

// RemoteError is an error reported by the NameNode or a DataNode.
type RemoteError struct {
	Op        string
	Path      string
	Status    int
	Exception string // e.g. FileNotFoundException
	Message   string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("webhdfs %s %s: HTTP %d %s: %s", e.Op, e.Path, e.Status, e.Exception, e.Message)
}

// do runs op on path and decodes the JSON answer into out (if non-nil).
func (c *Client) do(ctx context.Context, method, op, path string, params url.Values, out any) error {
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("webhdfs %s: path %q is not absolute", op, path)
	}
	q := url.Values{}
	for k, v := range params {
		q[k] = v
	}
	q.Set("op", op)
	if c.user != "" {
		q.Set("user.name", c.user)
	}
	u := c.base + "/webhdfs/v1" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return fmt.Errorf("webhdfs %s %s: %w", op, path, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("webhdfs %s %s: %w", op, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("webhdfs %s %s: read answer: %w", op, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var re struct {
			RemoteException struct {
				Exception string `json:"exception"`
				Message   string `json:"message"`
			} `json:"RemoteException"`
		}
		rerr := &RemoteError{Op: op, Path: path, Status: resp.StatusCode}
		if json.Unmarshal(body, &re) == nil && re.RemoteException.Exception != "" {
			rerr.Exception, rerr.Message = re.RemoteException.Exception, re.RemoteException.Message
		} else {
			rerr.Message = strings.TrimSpace(string(body))
		}
		return rerr
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("webhdfs %s %s: decode answer %.200q: %w", op, path, body, err)
	}
	return nil
}

// FileChecksum is a file checksum as HDFS reports it.
type FileChecksum struct {
	// Algorithm is e.g. "COMPOSITE-CRC32C" (block-size independent: with
	// dfs.checksum.combine.mode=COMPOSITE_CRC it is the CRC32C of the whole
	// file) or "MD5-of-0MD5-of-512CRC32C" (depends on the block size).
	Algorithm string
	Bytes     []byte
	Length    int64
}

// CRC32C returns the file's CRC32C when the checksum is a COMPOSITE-CRC32C,
// and false otherwise.
func (f FileChecksum) CRC32C() (uint32, bool) {
	if f.Algorithm != "COMPOSITE-CRC32C" || len(f.Bytes) != 4 {
		return 0, false
	}
	b := f.Bytes
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), true
}

// GetFileChecksum returns the checksum of the file at path. Which algorithm
// the cluster uses is its dfs.checksum.combine.mode setting.
func (c *Client) GetFileChecksum(ctx context.Context, path string) (FileChecksum, error) {
	var out struct {
		FileChecksum struct {
			Algorithm string `json:"algorithm"`
			Bytes     string `json:"bytes"`
			Length    int64  `json:"length"`
		} `json:"FileChecksum"`
	}
	if err := c.do(ctx, http.MethodGet, "GETFILECHECKSUM", path, nil, &out); err != nil {
		return FileChecksum{}, err
	}
	b, err := hex.DecodeString(out.FileChecksum.Bytes)
	if err != nil {
		return FileChecksum{}, fmt.Errorf("webhdfs GETFILECHECKSUM %s: bytes %q are not hex: %w", path, out.FileChecksum.Bytes, err)
	}
	return FileChecksum{Algorithm: out.FileChecksum.Algorithm, Bytes: b, Length: out.FileChecksum.Length}, nil
}

// SetModTime sets the modification time of the file or directory at path
// to mtime, to the millisecond (SETTIMES; HDFS keeps milliseconds, and
// colinmarc/hdfs's Chtimes sends whole seconds). The access time is left
// as it is (accesstime -1), which also works on clusters that keep no
// access times (dfs.namenode.accesstime.precision 0). A time before the
// epoch is refused here: HDFS takes -1 to mean "unchanged".
func (c *Client) SetModTime(ctx context.Context, path string, mtime time.Time) error {
	ms := mtime.UnixMilli()
	if ms < 0 {
		return fmt.Errorf("webhdfs SETTIMES %s: modification time %s is before 1970", path, mtime.UTC().Format(time.RFC3339Nano))
	}
	params := url.Values{"modificationtime": {strconv.FormatInt(ms, 10)}, "accesstime": {"-1"}}
	return c.do(ctx, http.MethodPut, "SETTIMES", path, params, nil)
}

// BlockLocation is one block of a file.
type BlockLocation struct {
	Offset int64    `json:"offset"`
	Length int64    `json:"length"`
	Hosts  []string `json:"hosts"`
}

// GetFileBlockLocations lists the blocks of the file at path.
func (c *Client) GetFileBlockLocations(ctx context.Context, path string) ([]BlockLocation, error) {
	var out struct {
		BlockLocations struct {
			BlockLocation []BlockLocation `json:"BlockLocation"`
		} `json:"BlockLocations"`
	}
	if err := c.do(ctx, http.MethodGet, "GETFILEBLOCKLOCATIONS", path, nil, &out); err != nil {
		return nil, err
	}
	return out.BlockLocations.BlockLocation, nil
}

// Concat appends the files sources, in order, to the file target and
// deletes them (CONCAT: the NameNode moves their blocks; no data is
// copied). HDFS requires every file in the same directory, the sources
// closed and not empty, and their block size no larger than target's. A
// path containing a comma cannot be a source (the operation takes them
// comma-separated) and is refused here.
func (c *Client) Concat(ctx context.Context, target string, sources []string) error {
	if len(sources) == 0 {
		return fmt.Errorf("webhdfs CONCAT %s: no sources", target)
	}
	for _, s := range sources {
		if !strings.HasPrefix(s, "/") || strings.Contains(s, ",") {
			return fmt.Errorf("webhdfs CONCAT %s: source %q is not an absolute path without commas", target, s)
		}
	}
	return c.do(ctx, http.MethodPost, "CONCAT", target, url.Values{"sources": {strings.Join(sources, ",")}}, nil)
}

// AllowSnapshot makes the directory at path snapshottable (superuser only).
func (c *Client) AllowSnapshot(ctx context.Context, path string) error {
	return c.do(ctx, http.MethodPut, "ALLOWSNAPSHOT", path, nil, nil)
}

// CreateSnapshot snapshots the directory at path under name and returns the
// snapshot's path (path/.snapshot/name).
func (c *Client) CreateSnapshot(ctx context.Context, path, name string) (string, error) {
	var out struct {
		Path string `json:"Path"`
	}
	err := c.do(ctx, http.MethodPut, "CREATESNAPSHOT", path, url.Values{"snapshotname": {name}}, &out)
	return out.Path, err
}

// DeleteSnapshot deletes the snapshot name of the directory at path.
func (c *Client) DeleteSnapshot(ctx context.Context, path, name string) error {
	return c.do(ctx, http.MethodDelete, "DELETESNAPSHOT", path, url.Values{"snapshotname": {name}}, nil)
}

// Snapshot is one snapshot of a snapshottable directory.
type Snapshot struct {
	// Name is the snapshot's name; Path its full path
	// (<directory>/.snapshot/<name>).
	Name, Path string
	// ID is the NameNode's snapshot ID, which grows with each snapshot
	// taken.
	ID int64
	// ModificationTime is when the snapshot was taken.
	ModificationTime time.Time
	// Deleted is set for a snapshot deleted but not yet garbage collected
	// (with dfs.namenode.snapshot.deletion.ordered); it cannot be read.
	Deleted bool
}

// GetSnapshotList lists the snapshots of the snapshottable directory dir,
// as the NameNode orders them (GETSNAPSHOTLIST, Hadoop 3.3 and later). A
// directory that is not snapshottable is a RemoteError with Exception
// SnapshotException; the root, which always is, may have none.
func (c *Client) GetSnapshotList(ctx context.Context, dir string) ([]Snapshot, error) {
	var out struct {
		SnapshotList []struct {
			DirStatus struct {
				PathSuffix       string `json:"pathSuffix"`
				ModificationTime int64  `json:"modificationTime"`
			} `json:"dirStatus"`
			FullPath       string `json:"fullPath"`
			SnapshotID     int64  `json:"snapshotID"`
			DeletionStatus string `json:"deletionStatus"`
		} `json:"SnapshotList"`
	}
	if err := c.do(ctx, http.MethodGet, "GETSNAPSHOTLIST", dir, nil, &out); err != nil {
		return nil, err
	}
	snaps := make([]Snapshot, 0, len(out.SnapshotList))
	for _, s := range out.SnapshotList {
		p := s.FullPath
		if p == "" {
			p = path.Join(dir, ".snapshot", s.DirStatus.PathSuffix)
		}
		snaps = append(snaps, Snapshot{Name: s.DirStatus.PathSuffix, Path: p, ID: s.SnapshotID,
			ModificationTime: time.UnixMilli(s.DirStatus.ModificationTime), Deleted: s.DeletionStatus == "DELETED"})
	}
	return snaps, nil
}

// GetSnapshottableDirectoryList lists the snapshottable directories
// (GETSNAPSHOTTABLEDIRECTORYLIST) as absolute paths: every one for a
// superuser, those the user owns otherwise.
func (c *Client) GetSnapshottableDirectoryList(ctx context.Context) ([]string, error) {
	var out struct {
		List []struct {
			DirStatus struct {
				PathSuffix string `json:"pathSuffix"`
			} `json:"dirStatus"`
			ParentFullPath string `json:"parentFullPath"`
		} `json:"SnapshottableDirectoryList"`
	}
	if err := c.do(ctx, http.MethodGet, "GETSNAPSHOTTABLEDIRECTORYLIST", "/", nil, &out); err != nil {
		return nil, err
	}
	dirs := make([]string, 0, len(out.List))
	for _, d := range out.List {
		dirs = append(dirs, path.Join("/", d.ParentFullPath, d.DirStatus.PathSuffix))
	}
	return dirs, nil
}

// Snapshot diff entry types, as HDFS names them.
const (
	DiffCreate = "CREATE"
	DiffModify = "MODIFY"
	DiffDelete = "DELETE"
	DiffRename = "RENAME"
)

// DiffEntry is one change between two snapshots. Paths are relative to the
// snapshot root.
type DiffEntry struct {
	Type       string `json:"type"`
	SourcePath string `json:"sourcePath"`
	TargetPath string `json:"targetPath,omitempty"`
}

// SnapshotDiff lists what changed under the snapshottable directory path
// from snapshot from to snapshot to ("" for the current state).
func (c *Client) SnapshotDiff(ctx context.Context, path, from, to string) ([]DiffEntry, error) {
	var out struct {
		SnapshotDiffReport struct {
			DiffList []DiffEntry `json:"diffList"`
		} `json:"SnapshotDiffReport"`
	}
	params := url.Values{"oldsnapshotname": {from}, "snapshotname": {to}}
	if err := c.do(ctx, http.MethodGet, "GETSNAPSHOTDIFF", path, params, &out); err != nil {
		return nil, err
	}
	return out.SnapshotDiffReport.DiffList, nil
}

// LocatedBlocks is the answer of GET_BLOCK_LOCATIONS: a file's length and
// the blocks covering a range of it, with the DataNodes that hold them.
type LocatedBlocks struct {
	FileLength          int64          `json:"fileLength"`
	IsUnderConstruction bool           `json:"isUnderConstruction"`
	IsLastBlockComplete bool           `json:"isLastBlockComplete"`
	LocatedBlocks       []LocatedBlock `json:"locatedBlocks"`
}

// LocatedBlock is one block of a file and the DataNodes that hold it.
type LocatedBlock struct {
	Block struct {
		PoolID string `json:"blockPoolId"`
		// Block IDs and generation stamps are Java longs; old clusters
		// have negative (random) block IDs.
		BlockID         int64 `json:"blockId"`
		GenerationStamp int64 `json:"generationStamp"`
		NumBytes        int64 `json:"numBytes"`
	} `json:"block"`
	// BlockToken is the block access token DataNodes of a cluster with
	// dfs.block.access.token.enable ask for; its URLString is the token in
	// Hadoop's URL-safe base64 encoding (internal/hdfscrc decodes it).
	BlockToken struct {
		URLString string `json:"urlString"`
	} `json:"blockToken"`
	StartOffset int64          `json:"startOffset"`
	IsCorrupt   bool           `json:"isCorrupt"`
	Locations   []DatanodeInfo `json:"locations"`
}

// DatanodeInfo is a DataNode as the NameNode reports it.
type DatanodeInfo struct {
	IPAddr   string `json:"ipAddr"`
	HostName string `json:"hostName"`
	XferPort int    `json:"xferPort"`
}

// GetBlockLocations lists the blocks of [offset, offset+length) of the
// file at path (the internal GET_BLOCK_LOCATIONS operation, which unlike
// GETFILEBLOCKLOCATIONS gives block IDs and transfer ports).
func (c *Client) GetBlockLocations(ctx context.Context, path string, offset, length int64) (LocatedBlocks, error) {
	var out struct {
		LocatedBlocks *LocatedBlocks `json:"LocatedBlocks"`
	}
	params := url.Values{"offset": {strconv.FormatInt(offset, 10)}, "length": {strconv.FormatInt(length, 10)}}
	if err := c.do(ctx, http.MethodGet, "GET_BLOCK_LOCATIONS", path, params, &out); err != nil {
		return LocatedBlocks{}, err
	}
	if out.LocatedBlocks == nil {
		return LocatedBlocks{}, fmt.Errorf("webhdfs GET_BLOCK_LOCATIONS %s: answer has no LocatedBlocks", path)
	}
	return *out.LocatedBlocks, nil
}
