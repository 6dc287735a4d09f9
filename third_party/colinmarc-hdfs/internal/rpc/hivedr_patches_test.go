package rpc

import (
	"bytes"
	"testing"

	hadoop "github.com/colinmarc/hdfs/v2/internal/protocol/hadoop_common"
	hdfs "github.com/colinmarc/hdfs/v2/internal/protocol/hadoop_hdfs"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	krbtypes "github.com/jcmturner/gokrb5/v8/types"
	"google.golang.org/protobuf/proto"
)

// TestSASLRequestWrapped: under privacy a request goes as an RpcSaslProto
// WRAP whose token is the plain request packet encrypted with the session
// key (no path in clear); under integrity as the packet with a checksum
// that verifies; sequence numbers count up from 1.
func TestSASLRequestWrapped(t *testing.T) {
	key := krbtypes.EncryptionKey{KeyType: etypeID.AES256_CTS_HMAC_SHA1_96, KeyValue: bytes.Repeat([]byte{9}, 32)}
	req := &hdfs.GetFileInfoRequestProto{Src: proto.String("/warehouse/secret_table")}
	var plain bytes.Buffer
	if err := (&basicTransport{clientID: []byte("c")}).writeRequest(&plain, "getFileInfo", 7, req); err != nil {
		t.Fatal(err)
	}
	for _, privacy := range []bool{true, false} {
		tr := &saslTransport{basicTransport: basicTransport{clientID: []byte("c")}, sessionKey: key, privacy: privacy, sendSeq: 1}
		for seq := uint64(1); seq <= 2; seq++ {
			var wire bytes.Buffer
			if err := tr.writeRequest(&wire, "getFileInfo", 7, req); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(wire.Bytes(), []byte("secret_table")) == privacy {
				t.Fatalf("privacy %t: the path in clear: %t", privacy, !privacy)
			}
			rrh, sasl := &hadoop.RpcRequestHeaderProto{}, &hadoop.RpcSaslProto{}
			if err := readRPCPacket(&wire, rrh, sasl); err != nil {
				t.Fatal(err)
			}
			if rrh.GetCallId() != saslRpcCallId || sasl.GetState() != hadoop.RpcSaslProto_WRAP {
				t.Fatalf("call %d state %s, want the SASL call's WRAP", rrh.GetCallId(), sasl.GetState())
			}
			tok := sasl.GetToken()
			var wt gssapi.WrapToken
			if err := wt.Unmarshal(tok, false); err != nil {
				t.Fatal(err)
			}
			if wt.SndSeqNum != seq {
				t.Fatalf("sequence number %d, want %d", wt.SndSeqNum, seq)
			}
			var got []byte
			if privacy {
				dec, err := crypto.DecryptMessage(tok[16:], key, keyusage.GSSAPI_INITIATOR_SEAL)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dec[len(dec)-16:], tok[:16]) {
					t.Fatal("the encrypted header copy differs from the header")
				}
				got = dec[:len(dec)-16]
			} else {
				if ok, err := wt.Verify(key, keyusage.GSSAPI_INITIATOR_SEAL); !ok {
					t.Fatal(err)
				}
				got = wt.Payload
			}
			if !bytes.Equal(got, plain.Bytes()) {
				t.Fatalf("privacy %t: the token holds %x, want the request packet %x", privacy, got, plain.Bytes())
			}
		}
	}
}
