package hdfscrc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// The golden bytes below are derived by hand from the field numbers of
// datatransfer.proto / hdfs.proto / Security.proto: a tag byte is
// field<<3 | wiretype (0 varint, 2 length-delimited), and varints are
// little-endian groups of 7 bits with the high bit set on all but the last.

func TestBlockChecksumRequestGolden(t *testing.T) {
	got := blockChecksumRequest(extendedBlock{
		PoolID:          "BP-1",
		BlockID:         1073741825, // 0x40000001
		GenerationStamp: 1001,       // 0x3e9
		NumBytes:        1 << 20,
	}, blockToken{})
	want := []byte{
		0x00, 0x1c, // data transfer version 28
		0x55,       // opcode 85, BLOCK_CHECKSUM
		0x25,       // OpBlockChecksumProto is 37 bytes
		0x0a, 0x1f, // 1: header, BaseHeaderProto of 31 bytes
		0x0a, 0x13, // 1.1: block, ExtendedBlockProto of 19 bytes
		0x0a, 0x04, 'B', 'P', '-', '1', // poolId
		0x10, 0x81, 0x80, 0x80, 0x80, 0x04, // blockId 0x40000001
		0x18, 0xe9, 0x07, // generationStamp 1001
		0x20, 0x80, 0x80, 0x40, // numBytes 1<<20
		0x12, 0x08, // 1.2: token, TokenProto of 8 bytes
		0x0a, 0x00, // identifier ""
		0x12, 0x00, // password ""
		0x1a, 0x00, // kind ""
		0x22, 0x00, // service ""
		0x12, 0x02, // 2: blockChecksumOptions, 2 bytes
		0x08, 0x02, // blockChecksumType COMPOSITE_CRC
	}
	if !bytes.Equal(got, want) {
		t.Errorf("request\n got % x\nwant % x", got, want)
	}
}

func TestBlockOpResponseGolden(t *testing.T) {
	ok := []byte{
		0x08, 0x00, // 1: status SUCCESS
		0x1a, 0x11, // 3: checksumResponse, 17 bytes
		0x08, 0x80, 0x04, // bytesPerCrc 512
		0x10, 0x00, // crcPerBlock 0
		0x1a, 0x04, 0xde, 0xad, 0xbe, 0xef, // blockChecksum
		0x20, 0x02, // crcType CHECKSUM_CRC32C
		0x2a, 0x02, 0x08, 0x02, // blockChecksumOptions{COMPOSITE_CRC}
		0x30, 0x07, // 6: shortCircuitAccessVersion (ignored)
		0x3d, 1, 2, 3, 4, // 7, fixed32: unknown field, skipped
	}
	r, err := unmarshalBlockOpResponse(ok)
	if err != nil {
		t.Fatal(err)
	}
	want := checksumResponse{
		BytesPerCrc:       512,
		BlockChecksum:     []byte{0xde, 0xad, 0xbe, 0xef},
		CrcType:           2,
		HasCrcType:        true,
		BlockChecksumType: 2,
	}
	if r.Status != 0 || r.Checksum == nil || fmt.Sprint(*r.Checksum) != fmt.Sprint(want) {
		t.Errorf("decoded %+v (checksum %+v), want status 0 and %+v", r, r.Checksum, want)
	}
	crc, err := blockCRCFromResponse(ok)
	if err != nil || crc != 0xdeadbeef {
		t.Errorf("blockCRCFromResponse = %08x, %v; want deadbeef", crc, err)
	}

	failed := []byte{
		0x08, 0x01, // status ERROR
		0x2a, 0x05, 'o', 'o', 'p', 's', '!', // 5: message
	}
	_, err = blockCRCFromResponse(failed)
	if err == nil || !strings.Contains(err.Error(), "ERROR: oops!") {
		t.Errorf("error answer gave %v", err)
	}
}

func TestBlockCRCFromResponseRejects(t *testing.T) {
	for name, c := range map[string]struct {
		resp    checksumResponse
		wantErr string
	}{
		"crc32":     {checksumResponse{BlockChecksum: make([]byte, 4), CrcType: 1, HasCrcType: true}, "CRC32, not CRC32C"},
		"no type":   {checksumResponse{BlockChecksum: make([]byte, 4)}, "unreported type"},
		"md5":       {checksumResponse{BlockChecksum: make([]byte, 16), CrcType: 2, HasCrcType: true}, "16-byte"},
		"md5crc":    {checksumResponse{BlockChecksum: make([]byte, 4), CrcType: 2, HasCrcType: true, BlockChecksumType: 1}, "type 1, not COMPOSITE_CRC"},
		"truncated": {checksumResponse{BlockChecksum: make([]byte, 3), CrcType: 2, HasCrcType: true}, "3-byte"},
	} {
		_, err := blockCRCFromResponse(marshalBlockOpResponse(0, "", &c.resp))
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: got error %v, want one containing %q", name, err, c.wantErr)
		}
	}
	if _, err := blockCRCFromResponse([]byte{0x1a, 0x00}); err == nil || !strings.Contains(err.Error(), "no status") {
		t.Errorf("answer without status: %v", err)
	}
	if _, err := blockCRCFromResponse([]byte{0x08}); err == nil {
		t.Error("truncated answer decoded")
	}
	if _, err := blockCRCFromResponse([]byte{0x08, 0x00}); err == nil || !strings.Contains(err.Error(), "without a checksum") {
		t.Errorf("answer without checksum: %v", err)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for _, b := range []extendedBlock{
		{PoolID: "BP-897971791-127.0.0.1-1796218059520", BlockID: 1073741844, GenerationStamp: 1020, NumBytes: 402848},
		{PoolID: "", BlockID: uint64(1<<64 - 5), GenerationStamp: 0, NumBytes: 0}, // negative Java long
		{PoolID: "p", BlockID: math.MaxUint64, GenerationStamp: math.MaxUint64, NumBytes: 128 << 20},
	} {
		frame := blockChecksumRequest(b, blockToken{})
		got, typ, err := readBlockChecksumRequest(bufio.NewReader(bytes.NewReader(frame)))
		if err != nil {
			t.Fatalf("%+v: %v", b, err)
		}
		if got != b || typ != blockChecksumComposite {
			t.Errorf("round trip of %+v gave %+v, checksum type %d", b, got, typ)
		}
	}
}

func TestResponseRoundTrip(t *testing.T) {
	want := checksumResponse{BytesPerCrc: 512, CrcPerBlock: 2048, BlockChecksum: []byte{1, 2, 3, 4}, CrcType: 2, HasCrcType: true, BlockChecksumType: 2}
	msg := marshalBlockOpResponse(0, "fine", &want)
	var framed bytes.Buffer
	framed.Write(protowire.AppendVarint(nil, uint64(len(msg))))
	framed.Write(msg)
	got, err := readDelimited(bufio.NewReader(&framed))
	if err != nil {
		t.Fatal(err)
	}
	r, err := unmarshalBlockOpResponse(got)
	if err != nil {
		t.Fatal(err)
	}
	if r.Message != "fine" || r.Checksum == nil || fmt.Sprint(*r.Checksum) != fmt.Sprint(want) {
		t.Errorf("round trip gave %+v (checksum %+v), want %+v", r, r.Checksum, want)
	}
}

func TestReadDelimitedErrors(t *testing.T) {
	for name, in := range map[string][]byte{
		"empty":      nil,
		"short":      {0x05, 1, 2},
		"huge":       protowire.AppendVarint(nil, maxResponse+1),
		"bad varint": {0x80},
	} {
		if _, err := readDelimited(bufio.NewReader(bytes.NewReader(in))); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// marshalBlockOpResponse encodes a BlockOpResponseProto, as a DataNode
// does (test helper).
func marshalBlockOpResponse(status uint64, message string, cs *checksumResponse) []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, status)
	if cs != nil {
		b = appendMessage(b, 3, func(m []byte) []byte {
			m = protowire.AppendTag(m, 1, protowire.VarintType)
			m = protowire.AppendVarint(m, cs.BytesPerCrc)
			m = protowire.AppendTag(m, 2, protowire.VarintType)
			m = protowire.AppendVarint(m, cs.CrcPerBlock)
			m = protowire.AppendTag(m, 3, protowire.BytesType)
			m = protowire.AppendBytes(m, cs.BlockChecksum)
			if cs.HasCrcType {
				m = protowire.AppendTag(m, 4, protowire.VarintType)
				m = protowire.AppendVarint(m, cs.CrcType)
			}
			if cs.BlockChecksumType != 0 {
				m = appendMessage(m, 5, func(o []byte) []byte {
					o = protowire.AppendTag(o, 1, protowire.VarintType)
					return protowire.AppendVarint(o, cs.BlockChecksumType)
				})
			}
			return m
		})
	}
	if message != "" {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendString(b, message)
	}
	return b
}

// readBlockChecksumRequest reads and decodes an OP_BLOCK_CHECKSUM request
// frame, as a DataNode does (test helper). It returns the block and the
// requested block checksum type.
func readBlockChecksumRequest(r *bufio.Reader) (extendedBlock, uint64, error) {
	var hdr [3]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return extendedBlock{}, 0, err
	}
	if v := binary.BigEndian.Uint16(hdr[:2]); v != dataTransferVersion || hdr[2] != opBlockChecksum {
		return extendedBlock{}, 0, fmt.Errorf("version %d op %d", v, hdr[2])
	}
	msg, err := readDelimited(r)
	if err != nil {
		return extendedBlock{}, 0, err
	}
	var (
		b        extendedBlock
		typ      uint64
		sawToken bool
	)
	err = walkFields(msg, func(num protowire.Number, _ uint64, v []byte) error {
		switch num {
		case 1: // header
			return walkFields(v, func(num protowire.Number, _ uint64, v []byte) error {
				switch num {
				case 1: // block
					return walkFields(v, func(num protowire.Number, x uint64, v []byte) error {
						switch num {
						case 1:
							b.PoolID = string(v)
						case 2:
							b.BlockID = x
						case 3:
							b.GenerationStamp = x
						case 4:
							b.NumBytes = x
						}
						return nil
					})
				case 2: // token: all four required fields, empty
					n := 0
					err := walkFields(v, func(num protowire.Number, _ uint64, v []byte) error {
						if num < 1 || num > 4 || len(v) != 0 {
							return fmt.Errorf("token field %d = %q", num, v)
						}
						n++
						return nil
					})
					if err == nil && n != 4 {
						err = fmt.Errorf("token has %d fields", n)
					}
					sawToken = true
					return err
				}
				return nil
			})
		case 2: // blockChecksumOptions
			return walkFields(v, func(num protowire.Number, x uint64, _ []byte) error {
				if num == 1 {
					typ = x
				}
				return nil
			})
		}
		return nil
	})
	if err == nil && !sawToken {
		err = errors.New("no token")
	}
	return b, typ, err
}
