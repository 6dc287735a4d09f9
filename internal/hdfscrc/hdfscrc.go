// Package hdfscrc computes the COMPOSITE-CRC32C of HDFS files: the CRC-32C
// (Castagnoli) of a file's bytes, which, unlike HDFS's default
// MD5-of-MD5-of-CRC32C file checksum, does not depend on the block size or
// bytes-per-checksum a cluster stores the file with. Two copies of a file on
// clusters with different block sizes have equal COMPOSITE-CRC32Cs exactly
// when their bytes' CRC-32Cs are equal, so a copy can be verified against
// the CRC-32C computed while streaming it.
//
// It does what Hadoop's own client does with
// dfs.checksum.combine.mode=COMPOSITE_CRC, without the JVM: it lists the
// file's blocks through WebHDFS (GET_BLOCK_LOCATIONS), asks a DataNode for
// each block's CRC with the data transfer protocol's OP_BLOCK_CHECKSUM
// (the DataNode derives it from its stored chunk CRCs without reading the
// data), and combines the block CRCs in order. WebHDFS's own GETFILECHECKSUM
// cannot be used: its DataNode handler always answers MD5-of-MD5.
//
// On kerberized clusters (WebHDFS with SPNEGO through the http.Client given
// to New) it sends each block's access token, which GET_BLOCK_LOCATIONS
// returns, and, with DataTransferProtection set, first authenticates to the
// DataNode with SASL DIGEST-MD5 keyed by that token (sasl.go), protecting
// the exchange with QOP auth-int under "integrity" and encrypting it under
// "privacy" (QOP auth-conf, then AES/CTR when the DataNode offers it). On
// a cluster with dfs.encrypt.data.transfer the DataNodes take the
// NameNode's data encryption key instead of the block token
// (Client.EncryptionKey). It handles replicated (not erasure-coded) files
// whose chunk checksums are CRC32C.
//
// Combine, the same arithmetic the block CRCs are joined with, gives the
// CRC-32C of a concatenation from its parts' CRC-32Cs; copyd uses it for
// files copied as ranges in parallel.
package hdfscrc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hivedr/hivedr/internal/webhdfs"
)

// ErrUnderConstruction is returned (wrapped) for a file that is still being
// written: its last block's length and CRC are not final.
var ErrUnderConstruction = errors.New("file is under construction")

// Default timeouts of a Client.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultIOTimeout   = 60 * time.Second
)

// Client computes file CRCs of one HDFS cluster. It is safe for concurrent
// use. Its exported fields may be changed before its first use.
type Client struct {
	// DialTimeout bounds connecting to a DataNode.
	DialTimeout time.Duration
	// IOTimeout bounds one OP_BLOCK_CHECKSUM exchange with a DataNode,
	// after connecting.
	IOTimeout time.Duration
	// DataTransferProtection is the cluster's dfs.data.transfer.protection:
	// empty (no SASL handshake), "authentication", "integrity" or
	// "privacy" (also for dfs.encrypt.data.transfer).
	DataTransferProtection string
	// EncryptionKey, under "privacy", returns the NameNode's current data
	// encryption key, or nil when the cluster does not encrypt data
	// transfer (dfs.encrypt.data.transfer off: block tokens are the
	// credentials). Nil: block tokens always.
	EncryptionKey func(ctx context.Context) (*DataEncryptionKey, error)

	web *webhdfs.Client
}

// New returns a client for the cluster whose NameNode serves WebHDFS at
// webhdfsAddr (host:port or a URL), acting as user (sent as user.name;
// simple authentication). A nil hc means http.DefaultClient. DataNodes are
// reached at the addresses the NameNode reports (IP address and transfer
// port).
func New(webhdfsAddr, user string, hc *http.Client) *Client {
	return &Client{
		DialTimeout: DefaultDialTimeout,
		IOTimeout:   DefaultIOTimeout,
		web:         webhdfs.New(webhdfsAddr, user, hc),
	}
}

// FileCRC32C returns the CRC-32C of the bytes of the file at path (an
// absolute path) and the file's length. An empty file has CRC 0. A file
// under construction is refused with an error wrapping
// ErrUnderConstruction. Errors from the NameNode are *webhdfs.RemoteError
// (for example with Exception "FileNotFoundException"); errors from
// DataNodes name the path, the block and each DataNode tried.
func (c *Client) FileCRC32C(ctx context.Context, path string) (crc uint32, length int64, err error) {
	blocks, length, err := c.locatedBlocks(ctx, path)
	if err != nil {
		return 0, 0, err
	}
	for _, b := range blocks {
		bc, err := c.blockCRC(ctx, path, b)
		if err != nil {
			return 0, 0, err
		}
		crc = Combine(crc, bc, b.Block.NumBytes)
	}
	return crc, length, nil
}

type (
	locatedBlock = webhdfs.LocatedBlock
	datanode     = webhdfs.DatanodeInfo
)

// xferAddr returns the DataNode's data transfer address.
func xferAddr(d datanode) string {
	host := d.IPAddr
	if host == "" {
		host = d.HostName
	}
	return net.JoinHostPort(host, strconv.Itoa(d.XferPort))
}

// locatedBlocks lists all blocks of the file at path, in order, and the
// file's length. The NameNode may answer a range with only some of its
// blocks, so it asks again from the first byte not yet covered.
func (c *Client) locatedBlocks(ctx context.Context, path string) ([]locatedBlock, int64, error) {
	var (
		blocks  []locatedBlock
		covered int64
		length  int64 = -1
	)
	for length < 0 || covered < length {
		// offset+length must not overflow a Java long on the NameNode,
		// so only the first request, at offset 0, asks for "everything".
		want := int64(math.MaxInt64)
		if length >= 0 {
			want = length - covered
		}
		lb, err := c.web.GetBlockLocations(ctx, path, covered, want)
		if err != nil {
			return nil, 0, err
		}
		if lb.IsUnderConstruction {
			return nil, 0, fmt.Errorf("hdfscrc: checksum of %s: %w", path, ErrUnderConstruction)
		}
		if length >= 0 && lb.FileLength != length {
			return nil, 0, fmt.Errorf("hdfscrc: checksum of %s: length changed from %d to %d while listing its blocks", path, length, lb.FileLength)
		}
		length = lb.FileLength
		progressed := false
		for _, b := range lb.LocatedBlocks {
			end := b.StartOffset + b.Block.NumBytes
			if end <= covered {
				continue // already have it
			}
			if b.StartOffset != covered || b.Block.NumBytes <= 0 {
				return nil, 0, fmt.Errorf("hdfscrc: checksum of %s: NameNode listed block %d at offset %d with %d bytes, expected a block at offset %d",
					path, b.Block.BlockID, b.StartOffset, b.Block.NumBytes, covered)
			}
			blocks = append(blocks, b)
			covered, progressed = end, true
		}
		if covered > length {
			return nil, 0, fmt.Errorf("hdfscrc: checksum of %s: blocks cover %d bytes of a %d-byte file", path, covered, length)
		}
		if covered < length && !progressed {
			return nil, 0, fmt.Errorf("hdfscrc: checksum of %s: NameNode listed no block at offset %d of %d", path, covered, length)
		}
	}
	return blocks, length, nil
}

// blockCRC asks the DataNodes holding block b, in the NameNode's order,
// for the block's CRC-32C until one answers.
func (c *Client) blockCRC(ctx context.Context, path string, b locatedBlock) (uint32, error) {
	prefix := fmt.Sprintf("hdfscrc: checksum of %s: block %d (offset %d, %d bytes)", path, b.Block.BlockID, b.StartOffset, b.Block.NumBytes)
	if b.IsCorrupt {
		return 0, fmt.Errorf("%s: every replica is corrupt", prefix)
	}
	if len(b.Locations) == 0 {
		return 0, fmt.Errorf("%s: no DataNode holds it", prefix)
	}
	eb := extendedBlock{
		PoolID:          b.Block.PoolID,
		BlockID:         uint64(b.Block.BlockID),
		GenerationStamp: uint64(b.Block.GenerationStamp),
		NumBytes:        uint64(b.Block.NumBytes),
	}
	var errs []error
	tok, err := decodeBlockToken(b.BlockToken.URLString)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", prefix, err)
	}
	for _, dn := range b.Locations {
		crc, err := c.askDatanode(ctx, xferAddr(dn), eb, tok)
		if err == nil {
			return crc, nil
		}
		errs = append(errs, fmt.Errorf("datanode %s: %w", xferAddr(dn), err))
		if ctx.Err() != nil {
			break
		}
	}
	return 0, fmt.Errorf("%s: %w", prefix, errors.Join(errs...))
}

// askDatanode sends OP_BLOCK_CHECKSUM for block b, with its access token,
// to the DataNode at addr and returns the block's CRC-32C.
func (c *Client) askDatanode(ctx context.Context, addr string, b extendedBlock, tok blockToken) (uint32, error) {
	d := net.Dialer{Timeout: c.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if c.IOTimeout > 0 {
		if err := conn.SetDeadline(time.Now().Add(c.IOTimeout)); err != nil {
			return 0, err
		}
	}
	// The end of ctx unblocks the exchange by expiring the deadline, so
	// that ctx.Err() is set whenever that is why the exchange failed.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	var rw io.ReadWriter = conn
	if c.DataTransferProtection != ProtectionNone {
		if err := CheckProtection(c.DataTransferProtection); err != nil {
			return 0, fmt.Errorf("data transfer protection: %w", err)
		}
		var dek *DataEncryptionKey
		if c.DataTransferProtection == ProtectionPrivacy && c.EncryptionKey != nil {
			if dek, err = c.EncryptionKey(ctx); err != nil {
				return 0, fmt.Errorf("data encryption key from the NameNode: %w", err)
			}
		}
		if rw, err = saslHandshake(conn, tok, c.DataTransferProtection, dek); err != nil {
			if ctx.Err() != nil {
				return 0, fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			return 0, err
		}
	}
	msg, err := exchange(rw, blockChecksumRequest(b, tok))
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return 0, err
	}
	return blockCRCFromResponse(msg)
}

// exchange writes req to conn and reads the varint-delimited answer.
func exchange(conn io.ReadWriter, req []byte) ([]byte, error) {
	if _, err := conn.Write(req); err != nil {
		return nil, fmt.Errorf("send OP_BLOCK_CHECKSUM: %w", err)
	}
	msg, err := readDelimited(bufio.NewReader(conn))
	if err != nil {
		return nil, fmt.Errorf("read OP_BLOCK_CHECKSUM answer: %w", err)
	}
	return msg, nil
}

// blockCRCFromResponse checks a BlockOpResponseProto answering
// OP_BLOCK_CHECKSUM with COMPOSITE_CRC and returns the block's CRC-32C.
func blockCRCFromResponse(msg []byte) (uint32, error) {
	r, err := unmarshalBlockOpResponse(msg)
	if err != nil {
		return 0, err
	}
	if r.Status != statusSuccess {
		return 0, fmt.Errorf("DataNode answered %s: %s", statusName(r.Status), r.Message)
	}
	cs := r.Checksum
	switch {
	case cs == nil:
		return 0, errors.New("DataNode answered without a checksum")
	case cs.BlockChecksumType != 0 && cs.BlockChecksumType != blockChecksumComposite:
		return 0, fmt.Errorf("DataNode answered block checksum type %d, not COMPOSITE_CRC (does it predate Hadoop 3.1?)", cs.BlockChecksumType)
	case !cs.HasCrcType || cs.CrcType != checksumTypeCRC32C:
		return 0, fmt.Errorf("block's chunk checksums are %s, not CRC32C", checksumTypeName(cs.CrcType, cs.HasCrcType))
	case len(cs.BlockChecksum) != 4:
		return 0, fmt.Errorf("DataNode answered a %d-byte block checksum, want the 4-byte COMPOSITE_CRC (does it predate Hadoop 3.1?)", len(cs.BlockChecksum))
	}
	return binary.BigEndian.Uint32(cs.BlockChecksum), nil
}

// statusName names a data transfer Status.
func statusName(s uint64) string {
	switch s {
	case 0:
		return "SUCCESS"
	case 1:
		return "ERROR"
	case 2:
		return "ERROR_CHECKSUM"
	case 3:
		return "ERROR_INVALID"
	case 4:
		return "ERROR_EXISTS"
	case 5:
		return "ERROR_ACCESS_TOKEN"
	case 7:
		return "ERROR_UNSUPPORTED"
	case 12:
		return "IN_PROGRESS"
	}
	return "status " + strconv.FormatUint(s, 10)
}

// checksumTypeName names a ChecksumTypeProto.
func checksumTypeName(t uint64, present bool) string {
	if !present {
		return "of an unreported type"
	}
	switch t {
	case 0:
		return "CHECKSUM_NULL"
	case 1:
		return "CRC32"
	case 2:
		return "CRC32C"
	}
	return "of type " + strconv.FormatUint(t, 10)
}
