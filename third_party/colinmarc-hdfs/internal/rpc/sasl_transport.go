package rpc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	hadoop "github.com/colinmarc/hdfs/v2/internal/protocol/hadoop_common"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	krbtypes "github.com/jcmturner/gokrb5/v8/types"
	"google.golang.org/protobuf/proto"
)

// saslTransport implements encrypted or signed RPC.
type saslTransport struct {
	basicTransport

	// sessionKey is the encryption key used to decrypt and encrypt the payload.
	sessionKey krbtypes.EncryptionKey
	// privacy indicates full message encryption
	privacy bool
	// sendSeq is the sequence number of the next wrap token sent; the
	// handshake's last message took 0.
	sendSeq uint64
}

// writeRequest writes a SASL-wrapped RPC request, as Hadoop's own client
// does under integrity or privacy: the whole request packet (length
// included) wrapped in one GSS-API wrap token, encrypted under privacy,
// carried as the token of an RpcSaslProto in state WRAP.
//
// Upstream sends requests unwrapped; a NameNode takes them, so under
// privacy requests (paths, xattr values, file names) went in clear while
// only responses were encrypted.
func (t *saslTransport) writeRequest(w io.Writer, method string, requestID int32, req proto.Message) error {
	var buf bytes.Buffer
	if err := t.basicTransport.writeRequest(&buf, method, requestID, req); err != nil {
		return err
	}
	token, err := t.wrap(buf.Bytes())
	if err != nil {
		return fmt.Errorf("wrap request: %w", err)
	}
	packet, err := makeRPCPacket(newRPCRequestHeader(saslRpcCallId, t.clientID),
		&hadoop.RpcSaslProto{State: hadoop.RpcSaslProto_WRAP.Enum(), Token: token})
	if err != nil {
		return err
	}
	_, err = w.Write(packet)
	return err
}

// wrap makes the initiator's next wrap token of msg (RFC 4121 section
// 4.2.6.2): under privacy msg and a copy of the header encrypted (no
// filler, no rotation), else msg and a checksum of msg and the header.
func (t *saslTransport) wrap(msg []byte) ([]byte, error) {
	seq := t.sendSeq
	if !t.privacy {
		et, err := crypto.GetEtype(t.sessionKey.KeyType)
		if err != nil {
			return nil, err
		}
		wt := gssapi.WrapToken{EC: uint16(et.GetHMACBitLength() / 8), SndSeqNum: seq, Payload: msg}
		if err := wt.SetCheckSum(t.sessionKey, keyusage.GSSAPI_INITIATOR_SEAL); err != nil {
			return nil, err
		}
		out, err := wt.Marshal()
		if err != nil {
			return nil, err
		}
		t.sendSeq++
		return out, nil
	}
	hdr := make([]byte, 16)
	hdr[0], hdr[1], hdr[2], hdr[3] = 0x05, 0x04, 0x02, 0xFF // sealed, from the initiator
	binary.BigEndian.PutUint64(hdr[8:], seq)
	et, err := crypto.GetEtype(t.sessionKey.KeyType)
	if err != nil {
		return nil, err
	}
	_, ct, err := et.EncryptMessage(t.sessionKey.KeyValue, append(append([]byte(nil), msg...), hdr...), keyusage.GSSAPI_INITIATOR_SEAL)
	if err != nil {
		return nil, err
	}
	t.sendSeq++
	return append(hdr, ct...), nil
}

// readResponse reads a SASL-wrapped RPC response.
func (t *saslTransport) readResponse(r io.Reader, method string, requestID int32, resp proto.Message) error {
	// First, read the sasl payload as a standard rpc response.
	sasl := hadoop.RpcSaslProto{}
	err := t.basicTransport.readResponse(r, method, saslRpcCallId, &sasl)
	if err != nil {
		return err
	} else if sasl.GetState() != hadoop.RpcSaslProto_WRAP {
		return fmt.Errorf("unexpected SASL state: %s", sasl.GetState().String())
	}

	// The SaslProto contains the actual payload.
	var wrapToken gssapi.WrapToken
	err = wrapToken.Unmarshal(sasl.GetToken(), true)
	if err != nil {
		return err
	}

	rrh := &hadoop.RpcResponseHeaderProto{}

	if t.privacy {
		// Decrypt the blob, which then looks like a normal RPC response.
		decrypted, err := crypto.DecryptMessage(wrapToken.Payload, t.sessionKey, keyusage.GSSAPI_ACCEPTOR_SEAL)
		if err != nil {
			return err
		}

		err = readRPCPacket(bytes.NewReader(decrypted), rrh, resp)
		if err != nil {
			return err
		}
	} else {
		// Verify the checksum; the blob is just a normal RPC response.
		_, err = wrapToken.Verify(t.sessionKey, keyusage.GSSAPI_ACCEPTOR_SEAL)
		if err != nil {
			return fmt.Errorf("unverifiable message from namenode: %s", err)
		}

		err = readRPCPacket(bytes.NewReader(wrapToken.Payload), rrh, resp)
		if err != nil {
			return err
		}
	}

	if int32(rrh.GetCallId()) != requestID {
		return errUnexpectedSequenceNumber
	} else if rrh.GetStatus() != hadoop.RpcResponseHeaderProto_SUCCESS {
		return &NamenodeError{
			method:    method,
			message:   rrh.GetErrorMsg(),
			code:      int(rrh.GetErrorDetail()),
			exception: rrh.GetExceptionClassName(),
		}
	}

	return nil
}
