package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
)

// authErrors are the broker's answers that the credentials or the ACLs
// are wrong: no retry changes them, so every role stops on them at once.
var authErrors = []error{
	kerr.SaslAuthenticationFailed, kerr.UnsupportedSaslMechanism, kerr.IllegalSaslState,
	kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed,
	kerr.TransactionalIDAuthorizationFailed, kerr.DelegationTokenAuthorizationFailed,
}

// IsAuthError reports whether err says that Kafka refused hivedr's
// credentials or an ACL denied it something, or that the broker's TLS
// certificate did not verify: errors a retry cannot fix.
func IsAuthError(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range authErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return IsTLSRefusal(err)
}

// IsTLSRefusal reports whether err says a TLS handshake failed for good:
// the server's certificate did not verify, the server refused ours (an
// alert such as certificate_required or unknown_ca), or the server does
// not speak TLS at all.
func IsTLSRefusal(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		alert    tls.AlertError
		header   tls.RecordHeaderError
		op       *net.OpError
	)
	// A TLS alert the server sent comes as a net.OpError "remote error"
	// (the alert type itself is crypto/tls's own).
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &alert) || errors.As(err, &header) || (errors.As(err, &op) && op.Op == "remote error")
}
