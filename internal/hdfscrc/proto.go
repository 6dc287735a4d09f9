package hdfscrc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file hand-encodes the few messages of HDFS's data transfer protocol
// that OP_BLOCK_CHECKSUM needs (field numbers from Hadoop's
// datatransfer.proto, hdfs.proto and Security.proto, all proto2).

// Data transfer protocol framing.
const (
	dataTransferVersion = 28 // DataTransferProtocol.DATA_TRANSFER_VERSION
	opBlockChecksum     = 85 // Op.BLOCK_CHECKSUM
)

// Enum values.
const (
	statusSuccess          = 0 // Status.SUCCESS
	checksumTypeCRC32C     = 2 // ChecksumTypeProto.CHECKSUM_CRC32C
	blockChecksumComposite = 2 // BlockChecksumTypeProto.COMPOSITE_CRC
)

// maxResponse bounds the size of a BlockOpResponseProto we accept.
const maxResponse = 1 << 20

// extendedBlock identifies one block of a block pool (ExtendedBlockProto).
type extendedBlock struct {
	PoolID          string
	BlockID         uint64
	GenerationStamp uint64
	NumBytes        uint64
}

// appendExtendedBlock appends the ExtendedBlockProto fields of b.
func appendExtendedBlock(buf []byte, b extendedBlock) []byte {
	buf = protowire.AppendTag(buf, 1, protowire.BytesType) // poolId
	buf = protowire.AppendString(buf, b.PoolID)
	buf = protowire.AppendTag(buf, 2, protowire.VarintType) // blockId
	buf = protowire.AppendVarint(buf, b.BlockID)
	buf = protowire.AppendTag(buf, 3, protowire.VarintType) // generationStamp
	buf = protowire.AppendVarint(buf, b.GenerationStamp)
	buf = protowire.AppendTag(buf, 4, protowire.VarintType) // numBytes
	return protowire.AppendVarint(buf, b.NumBytes)
}

// appendEmptyToken appends the fields of a TokenProto whose required
// fields (identifier, password, kind, service) are all empty: the block
// token of a cluster without block access tokens.
func appendEmptyToken(buf []byte) []byte {
	for num := protowire.Number(1); num <= 4; num++ {
		buf = protowire.AppendTag(buf, num, protowire.BytesType)
		buf = protowire.AppendBytes(buf, nil)
	}
	return buf
}

// appendMessage appends field num holding the message that fill appends.
func appendMessage(buf []byte, num protowire.Number, fill func([]byte) []byte) []byte {
	buf = protowire.AppendTag(buf, num, protowire.BytesType)
	return protowire.AppendBytes(buf, fill(nil))
}

// marshalOpBlockChecksum returns an OpBlockChecksumProto asking for the
// COMPOSITE_CRC of block b, with block access token tok (empty on clusters
// without block access tokens).
func marshalOpBlockChecksum(b extendedBlock, tok blockToken) []byte {
	msg := appendMessage(nil, 1, func(hdr []byte) []byte { // header: BaseHeaderProto
		hdr = appendMessage(hdr, 1, func(blk []byte) []byte { // block
			return appendExtendedBlock(blk, b)
		})
		if tok.empty() {
			return appendMessage(hdr, 2, appendEmptyToken) // token
		}
		return appendMessage(hdr, 2, func(t []byte) []byte { return appendToken(t, tok) })
	})
	return appendMessage(msg, 2, func(opts []byte) []byte { // blockChecksumOptions
		opts = protowire.AppendTag(opts, 1, protowire.VarintType) // blockChecksumType
		return protowire.AppendVarint(opts, blockChecksumComposite)
	})
}

// blockChecksumRequest returns the bytes a client sends to a DataNode's
// data transfer port to ask for the COMPOSITE_CRC of block b: the protocol
// version (2 bytes, big-endian), the opcode (1 byte) and the
// varint-length-delimited OpBlockChecksumProto.
func blockChecksumRequest(b extendedBlock, tok blockToken) []byte {
	frame := binary.BigEndian.AppendUint16(nil, dataTransferVersion)
	frame = append(frame, opBlockChecksum)
	return protowire.AppendBytes(frame, marshalOpBlockChecksum(b, tok))
}

// blockOpResponse holds the fields of a BlockOpResponseProto that
// OP_BLOCK_CHECKSUM answers with.
type blockOpResponse struct {
	Status       uint64
	FirstBadLink string
	Message      string
	Checksum     *checksumResponse // checksumResponse, nil if absent
}

// checksumResponse is an OpBlockChecksumResponseProto.
type checksumResponse struct {
	BytesPerCrc       uint64
	CrcPerBlock       uint64
	BlockChecksum     []byte
	CrcType           uint64 // ChecksumTypeProto; 0 (CHECKSUM_NULL) if absent
	HasCrcType        bool
	BlockChecksumType uint64 // blockChecksumOptions.blockChecksumType; 0 if absent
}

// walkFields calls fn for each field of the protobuf message b, with the
// field's varint value or its length-delimited bytes. Fields of other wire
// types are skipped.
func walkFields(b []byte, fn func(num protowire.Number, v uint64, bytes []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("bad field tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			if err := fn(num, v, nil); err != nil {
				return err
			}
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			if err := fn(num, 0, v); err != nil {
				return err
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return nil
}

// unmarshalBlockOpResponse decodes a BlockOpResponseProto.
func unmarshalBlockOpResponse(b []byte) (blockOpResponse, error) {
	var r blockOpResponse
	hasStatus := false
	err := walkFields(b, func(num protowire.Number, v uint64, bytes []byte) error {
		switch num {
		case 1: // status
			r.Status, hasStatus = v, true
		case 2: // firstBadLink
			r.FirstBadLink = string(bytes)
		case 3: // checksumResponse
			c, err := unmarshalChecksumResponse(bytes)
			if err != nil {
				return fmt.Errorf("checksumResponse: %w", err)
			}
			r.Checksum = &c
		case 5: // message
			r.Message = string(bytes)
		}
		return nil
	})
	if err != nil {
		return blockOpResponse{}, fmt.Errorf("decode BlockOpResponseProto: %w", err)
	}
	if !hasStatus {
		return blockOpResponse{}, errors.New("decode BlockOpResponseProto: no status")
	}
	return r, nil
}

// unmarshalChecksumResponse decodes an OpBlockChecksumResponseProto.
func unmarshalChecksumResponse(b []byte) (checksumResponse, error) {
	var c checksumResponse
	err := walkFields(b, func(num protowire.Number, v uint64, bytes []byte) error {
		switch num {
		case 1: // bytesPerCrc
			c.BytesPerCrc = v
		case 2: // crcPerBlock
			c.CrcPerBlock = v
		case 3: // blockChecksum
			c.BlockChecksum = append([]byte(nil), bytes...)
		case 4: // crcType
			c.CrcType, c.HasCrcType = v, true
		case 5: // blockChecksumOptions
			return walkFields(bytes, func(num protowire.Number, v uint64, _ []byte) error {
				if num == 1 { // blockChecksumType
					c.BlockChecksumType = v
				}
				return nil
			})
		}
		return nil
	})
	return c, err
}

// readDelimited reads one varint-length-prefixed message from r.
func readDelimited(r *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read message length: %w", err)
	}
	if n > maxResponse {
		return nil, fmt.Errorf("message of %d bytes exceeds the limit of %d", n, maxResponse)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %d-byte message: %w", n, err)
	}
	return buf, nil
}
