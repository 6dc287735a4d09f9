package iceberg

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/linkedin/goavro/v2"
)

// ocfMagic starts every Avro object container file.
var ocfMagic = []byte("Obj\x01")

// container is an Avro object container file read whole: its header
// (kept byte for byte, so a rewrite names the writer's schema, with its
// Iceberg field IDs, and the file's key/value metadata unchanged), its
// sync marker, its codec and its records in their native goavro form.
type container struct {
	meta    map[string][]byte
	sync    [16]byte
	codec   *goavro.Codec
	records []any
}

// readContainer decodes an Avro object container file: the manifest
// lists and manifests of an Iceberg table are such files.
func readContainer(b []byte) (*container, error) {
	if !bytes.HasPrefix(b, ocfMagic) {
		return nil, errors.New("not an Avro object container file (no Obj\\x01 magic)")
	}
	r, err := goavro.NewOCFReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("avro container: %w", err)
	}
	c := &container{meta: r.MetaData(), codec: r.Codec()}
	switch r.CompressionName() {
	case goavro.CompressionNullLabel, goavro.CompressionDeflateLabel:
	default:
		// Iceberg writes deflate (its default) or null; others
		// (snappy, zstandard) would need their codec to write back.
		return nil, fmt.Errorf("avro container compressed with %q: only null and deflate are rewritten", r.CompressionName())
	}
	for r.Scan() {
		rec, err := r.Read()
		if err != nil {
			return nil, fmt.Errorf("avro container: record %d: %w", len(c.records), err)
		}
		c.records = append(c.records, rec)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("avro container: %w", err)
	}
	// goavro does not give the sync marker; it is the 16 bytes after the
	// header's metadata map.
	n, err := headerLen(b)
	if err != nil {
		return nil, err
	}
	copy(c.sync[:], b[n-16:n])
	return c, nil
}

// headerLen is the length of the container's header: magic, metadata
// map, sync marker.
func headerLen(b []byte) (int, error) {
	r := bytes.NewReader(b[len(ocfMagic):])
	for {
		count, err := binary.ReadVarint(r)
		if err != nil {
			return 0, fmt.Errorf("avro container header: %w", err)
		}
		if count == 0 {
			break
		}
		if count < 0 {
			count = -count
			if _, err := binary.ReadVarint(r); err != nil { // block size
				return 0, fmt.Errorf("avro container header: %w", err)
			}
		}
		for range count * 2 { // key, then value
			l, err := binary.ReadVarint(r)
			if err != nil || l < 0 || l > int64(r.Len()) {
				return 0, fmt.Errorf("avro container header: bad length %d (%v)", l, err)
			}
			if _, err := r.Seek(l, io.SeekCurrent); err != nil {
				return 0, err
			}
		}
	}
	n := len(b) - r.Len() + 16
	if n > len(b) {
		return 0, errors.New("avro container header: no sync marker")
	}
	return n, nil
}

// bytes encodes the container again: the same metadata (keys in order),
// the same sync marker and codec, the records in one block. Equal
// records give equal bytes, so a rewrite's size is known before it is
// written anywhere.
func (c *container) bytes() ([]byte, error) {
	var out bytes.Buffer
	out.Write(ocfMagic)
	keys := make([]string, 0, len(c.meta))
	for k := range c.meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var hdr []byte
	hdr = binary.AppendVarint(hdr, int64(len(keys)))
	for _, k := range keys {
		hdr = binary.AppendVarint(hdr, int64(len(k)))
		hdr = append(hdr, k...)
		hdr = binary.AppendVarint(hdr, int64(len(c.meta[k])))
		hdr = append(hdr, c.meta[k]...)
	}
	if len(keys) > 0 {
		hdr = binary.AppendVarint(hdr, 0)
	}
	out.Write(hdr)
	out.Write(c.sync[:])
	if len(c.records) == 0 {
		return out.Bytes(), nil
	}
	var data []byte
	for i, rec := range c.records {
		var err error
		if data, err = c.codec.BinaryFromNative(data, rec); err != nil {
			return nil, fmt.Errorf("avro container: encoding record %d: %w", i, err)
		}
	}
	if string(c.meta["avro.codec"]) == goavro.CompressionDeflateLabel {
		var z bytes.Buffer
		w, err := flate.NewWriter(&z, flate.DefaultCompression)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		data = z.Bytes()
	}
	var blk []byte
	blk = binary.AppendVarint(blk, int64(len(c.records)))
	blk = binary.AppendVarint(blk, int64(len(data)))
	out.Write(blk)
	out.Write(data)
	out.Write(c.sync[:])
	return out.Bytes(), nil
}
