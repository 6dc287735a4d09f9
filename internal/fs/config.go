package fs

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/hivedr/hivedr/internal/hdfscrc"
	"github.com/hivedr/hivedr/internal/krb"
	"github.com/hivedr/hivedr/internal/location"
)

// Config says how to reach every store that locations may name. It is the
// `filesystems:` section of hivedr's configuration.
//
//	filesystems:
//	  local: true
//	  hdfs:
//	    - namenodes: [nn1.example.com:8020]
//	      webhdfs: nn1.example.com:9870
//	      user: hive
//	  s3:
//	    - endpoint: https://s3.eu-west-1.amazonaws.com
//	      region: eu-west-1
//	      access_key: AKIA...
//	      secret_key: ...
type Config struct {
	// Local allows local paths (/p or file:///p). Default false.
	Local bool `yaml:"local"`
	// HDFS lists the clusters, one per authority.
	HDFS []HDFSConfig `yaml:"hdfs"`
	// S3 lists the S3 endpoints. Each serves the buckets it lists; one
	// entry may list none and then serves every other bucket.
	S3 []S3Config `yaml:"s3"`

	// Kerberos is the logged-in principal the kerberized clusters (those
	// with NameNodePrincipal) are reached as; set by the command after
	// login, never read from YAML.
	Kerberos *krb.Client `yaml:"-"`
}

// HDFSConfig is one HDFS cluster.
type HDFSConfig struct {
	// Authority is the host:port (or HA nameservice) that hdfs://
	// locations on this cluster carry. Default: the first NameNode. It is
	// compared in canonical form (location.CanonicalAuthority), so nn1,
	// NN1:8020 and nn1:8020 are one authority, and locations match it
	// written with or without the default port 8020.
	Authority string `yaml:"authority"`
	// NameNodes are the NameNodes' RPC addresses, host:port. Required.
	NameNodes []string `yaml:"namenodes"`
	// WebHDFS is the active NameNode's HTTP address, host:port or URL;
	// checksums are read through it. Required.
	WebHDFS string `yaml:"webhdfs"`
	// User is the HDFS user to act as (simple authentication). Required
	// unless the cluster is kerberized (NameNodePrincipal), where hivedr is
	// its Kerberos principal and User must be empty.
	User string `yaml:"user"`
	// NameNodePrincipal makes the cluster kerberized: the NameNodes'
	// service principal (dfs.namenode.kerberos.principal, e.g.
	// nn/_HOST@REALM; _HOST becomes the NameNode's host). RPC then
	// authenticates with Kerberos as the configuration's kerberos.principal
	// and WebHDFS with SPNEGO.
	NameNodePrincipal string `yaml:"namenode_principal"`
	// HTTPPrincipal is WebHDFS's SPNEGO principal
	// (dfs.web.authentication.kerberos.principal). Default HTTP/_HOST.
	HTTPPrincipal string `yaml:"http_principal"`
	// DataTransferProtection is the cluster's dfs.data.transfer.protection:
	// "authentication", "integrity" or "privacy" (SASL with the block
	// access token on every DataNode connection, for reads, writes and
	// checksums; "privacy" encrypts, with AES/CTR where the DataNodes
	// offer it); empty when the DataNodes use privileged ports instead.
	// A cluster with dfs.encrypt.data.transfer=true takes "privacy" (the
	// credentials are then the NameNode's data encryption key). RPC to the
	// NameNode takes the QOP the NameNode asks for (hadoop.rpc.protection,
	// privacy included) without a setting.
	DataTransferProtection string `yaml:"data_transfer_protection"`
	// CAFile is a PEM file of the CA certificates an https:// WebHDFS
	// address is trusted with. Default: the system's roots.
	CAFile string `yaml:"ca_file"`
	// Kerberos is set from Config.Kerberos by NewRouter.
	Kerberos *krb.Client `yaml:"-"`
	// Concat lets copies to this cluster write a large file as ranges in
	// parallel, to staging files joined with WebHDFS CONCAT (see
	// HDFS.CreateSplit). Default false: one stream per file.
	Concat bool `yaml:"concat"`
}

// authority returns the canonical authority locations on the cluster
// carry.
func (c HDFSConfig) authority() (string, error) {
	a, key := c.Authority, "authority"
	if a == "" && len(c.NameNodes) > 0 {
		a, key = c.NameNodes[0], "namenodes[0]"
	}
	auth, err := location.CanonicalAuthority(location.SchemeHDFS, a)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	return auth, nil
}

func (c HDFSConfig) validate() error {
	if len(c.NameNodes) == 0 {
		return errors.New("namenodes: at least one NameNode address is required")
	}
	for i, nn := range c.NameNodes {
		if _, _, err := net.SplitHostPort(nn); err != nil {
			return fmt.Errorf("namenodes[%d]: %q is not host:port", i, nn)
		}
	}
	if c.WebHDFS == "" {
		return errors.New("webhdfs: required")
	}
	if c.NameNodePrincipal != "" {
		if c.User != "" {
			return fmt.Errorf("user: %q is not used with namenode_principal (a kerberized cluster knows hivedr by kerberos.principal); remove it", c.User)
		}
	} else {
		if c.User == "" {
			return errors.New("user: required")
		}
		if c.HTTPPrincipal != "" {
			return errors.New("http_principal: set without namenode_principal (only a kerberized cluster uses SPNEGO)")
		}
	}
	if err := hdfscrc.CheckProtection(c.DataTransferProtection); err != nil {
		return fmt.Errorf("data_transfer_protection: %w", err)
	}
	return nil
}

// Defaults of S3Config.
const (
	DefaultS3Region        = "us-east-1"
	DefaultS3PartSize      = 8 << 20
	DefaultS3PartsInFlight = 2
	// MinS3PartSize is S3's smallest part but the last.
	MinS3PartSize = 5 << 20
	// maxS3Parts is S3's largest part number.
	maxS3Parts = 10000
)

// S3Config is one S3 endpoint and the buckets it serves; one client serves
// them all.
type S3Config struct {
	// Endpoint is the service URL, e.g. http://127.0.0.1:19000. Empty
	// means AWS's endpoint for Region.
	Endpoint string `yaml:"endpoint"`
	// Region signs requests. Default us-east-1.
	Region string `yaml:"region"`
	// AccessKey and SecretKey are static credentials. With neither, the
	// AWS SDK's default credential chain finds them: the environment
	// (AWS_ACCESS_KEY_ID, ...), the shared files (~/.aws/credentials and
	// config, profile Profile or AWS_PROFILE), web identity
	// (AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN: Kubernetes IRSA),
	// ECS container credentials, then the EC2 instance metadata service.
	AccessKey string `yaml:"access_key"`
	// SecretKey is access_key's secret (${NAME} reads it from the
	// environment). Not with secret_key_file.
	SecretKey string `yaml:"secret_key"`
	// SecretKeyFile is a file holding access_key's secret (a mounted
	// Kubernetes Secret), read again when the credentials are a minute
	// old, so a key rotated in place is picked up without a restart;
	// surrounding whitespace is dropped. Not with secret_key.
	SecretKeyFile string `yaml:"secret_key_file"`
	// Profile is the shared-files profile the default chain reads;
	// default AWS_PROFILE, else "default". Not with access_key.
	Profile string `yaml:"profile"`
	// Anonymous sends unsigned requests (public buckets) instead of
	// looking for credentials. Not with access_key or profile.
	Anonymous bool `yaml:"anonymous"`
	// PathStyle addresses buckets as endpoint/bucket rather than
	// bucket.endpoint (needed by most non-AWS servers).
	PathStyle bool `yaml:"path_style"`
	// Buckets served by this endpoint. Empty: every bucket no other entry
	// lists (at most one entry may leave it empty).
	Buckets []string `yaml:"buckets"`
	// PartSize is the multipart part size in bytes, and the largest object
	// written with a single PutObject. Default 8 MiB; at least 5 MiB. It
	// grows for a file whose known size would need more than 10,000
	// parts.
	PartSize int64 `yaml:"part_size"`
	// PartsInFlight bounds the parts of one file uploading at once; a
	// writer holds at most PartsInFlight+1 parts in memory. Default 2.
	PartsInFlight int `yaml:"parts_in_flight"`
	// SSE is the server-side encryption every object written gets:
	// "AES256" (SSE-S3) or "aws:kms" (SSE-KMS, with SSEKMSKeyID). Empty:
	// the bucket's default.
	SSE string `yaml:"sse"`
	// SSEKMSKeyID is the KMS key (ID, ARN or alias) of SSE aws:kms; empty
	// uses the account's default key. Only with sse: aws:kms.
	SSEKMSKeyID string `yaml:"sse_kms_key_id"`
	// ACL is the canned ACL every object written gets (private,
	// bucket-owner-full-control, ...). Empty: none sent (the bucket's
	// object ownership decides).
	ACL string `yaml:"acl"`
}

// The values of S3Config.SSE.
const (
	SSES3  = "AES256"
	SSEKMS = "aws:kms"
)

// s3CannedACLs are the canned ACLs S3 defines for objects.
var s3CannedACLs = []string{"private", "public-read", "public-read-write", "authenticated-read",
	"aws-exec-read", "bucket-owner-read", "bucket-owner-full-control"}

// withDefaults returns c with defaults filled in (EnsureDefaults), or an
// error naming the bad key (Validate).
func (c S3Config) withDefaults() (S3Config, error) {
	c.EnsureDefaults()
	return c, c.Validate()
}

// EnsureDefaults fills the keys left zero with their defaults: Region,
// PartSize and PartsInFlight.
func (c *S3Config) EnsureDefaults() {
	if c.Region == "" {
		c.Region = DefaultS3Region
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultS3PartSize
	}
	if c.PartsInFlight == 0 {
		c.PartsInFlight = DefaultS3PartsInFlight
	}
}

// Validate checks c once its defaults are filled, naming the bad key
// relative to the entry (e.g. `part_size: ...`).
func (c S3Config) Validate() error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("endpoint: %q is not an http(s) URL", c.Endpoint)
		}
	}
	if c.SecretKey != "" && c.SecretKeyFile != "" {
		return errors.New("secret_key, secret_key_file: give one, not both")
	}
	if (c.AccessKey == "") != (c.SecretKey == "" && c.SecretKeyFile == "") {
		return errors.New("access_key, secret_key (or secret_key_file): give both or neither")
	}
	if c.Profile != "" && c.AccessKey != "" {
		return errors.New("profile: not with access_key (static keys are not looked up in the shared files)")
	}
	if c.Anonymous && (c.AccessKey != "" || c.Profile != "") {
		return errors.New("anonymous: not with access_key or profile")
	}
	if c.PartSize < MinS3PartSize {
		return fmt.Errorf("part_size: %d is below S3's minimum of %d", c.PartSize, MinS3PartSize)
	}
	if c.PartsInFlight < 1 {
		return fmt.Errorf("parts_in_flight: %d, want at least 1", c.PartsInFlight)
	}
	switch c.SSE {
	case "", SSES3, SSEKMS:
	default:
		return fmt.Errorf("sse: %q is not %s (SSE-S3) or %s (SSE-KMS)", c.SSE, SSES3, SSEKMS)
	}
	if c.SSEKMSKeyID != "" && c.SSE != SSEKMS {
		return fmt.Errorf("sse_kms_key_id: given with sse %q; it needs sse: %s", c.SSE, SSEKMS)
	}
	if c.ACL != "" && !slices.Contains(s3CannedACLs, c.ACL) {
		return fmt.Errorf("acl: %q is not a canned ACL (%s)", c.ACL, strings.Join(s3CannedACLs, ", "))
	}
	for i, b := range c.Buckets {
		if b == "" || strings.ContainsAny(b, "/") {
			return fmt.Errorf("buckets[%d]: %q is not a bucket name", i, b)
		}
	}
	return nil
}

// EnsureDefaults fills every entry's defaults: an HDFS cluster's
// Authority (its first NameNode), an S3 endpoint's (S3Config.EnsureDefaults).
func (c *Config) EnsureDefaults() {
	for i, h := range c.HDFS {
		if h.Authority == "" && len(h.NameNodes) > 0 {
			c.HDFS[i].Authority = h.NameNodes[0]
		}
	}
	for i := range c.S3 {
		c.S3[i].EnsureDefaults()
	}
}

// Validate checks every entry and that no two claim the same HDFS
// authority or S3 bucket, as NewRouter does, without building or
// connecting to anything. Errors name the key relative to the
// `filesystems:` section, e.g. `hdfs[1].user: required`.
func (c Config) Validate() error {
	authorities := map[string]int{}
	for i, h := range c.HDFS {
		if err := h.validate(); err != nil {
			return fmt.Errorf("hdfs[%d].%w", i, err)
		}
		a, err := h.authority()
		if err != nil {
			return fmt.Errorf("hdfs[%d].%w", i, err)
		}
		if j, dup := authorities[a]; dup {
			return fmt.Errorf("hdfs[%d]: authority %s is hdfs[%d]'s too; list each cluster once", i, a, j)
		}
		authorities[a] = i
	}
	buckets := map[string]int{}
	catchAll := -1
	for i, s := range c.S3 {
		s.EnsureDefaults() // a copy: c is not changed
		if err := s.Validate(); err != nil {
			return fmt.Errorf("s3[%d].%w", i, err)
		}
		if len(s.Buckets) == 0 {
			if catchAll >= 0 {
				return fmt.Errorf("s3[%d].buckets: s3[%d] lists none already; only one S3 endpoint may leave its buckets unlisted", i, catchAll)
			}
			catchAll = i
		}
		for j, b := range s.Buckets {
			b = strings.ToLower(b)
			if k, dup := buckets[b]; dup {
				return fmt.Errorf("s3[%d].buckets[%d]: bucket %s is listed by s3[%d] too", i, j, b, k)
			}
			buckets[b] = i
		}
	}
	return nil
}
