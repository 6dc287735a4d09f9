// Package testenv gives tests the local real stack that `make stack-up`
// starts (e2e/stack/stack.sh): its addresses, read from the generated env
// file ($HIVEDR_STACK_ENV, else $HIVEDR_STACK_DIR/env, else .stack/env in
// the module's root), and ready clients for each service.
//
// A test that needs the stack calls Require. When the stack is not up the
// test fails (it never skips) with a message that says how to start it.
// The secured stack (`make stack-secure-up`, HIVEDR_STACK_SECURE=1) is
// RequireSecure's: its env file is $HIVEDR_SECURE_STACK_ENV, else
// $HIVEDR_SECURE_STACK_DIR/env, else .stack-secure/env in the module's
// root, and its Kafka clients authenticate as its admin user.
package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/colinmarc/hdfs/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hdfscrc"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/krb"
	"github.com/hivedr/hivedr/internal/webhdfs"
)

// Site names one side of replication.
type Site string

// The sites of the local stack. DR2 is the second DR site (HDFS cluster
// dr2 and metastore hms-dr2), on the plain stack only.
const (
	Source Site = "SRC"
	DR     Site = "DR"
	DR2    Site = "DR2"
)

// Env holds the addresses of the local stack.
type Env struct {
	// Path is the env file the addresses were read from.
	Path string
	vars map[string]string

	owner testing.TB // the test that called Require
	mu    sync.Mutex
	admin *kadm.Client // shared by the owner's test and its subtests

	// kafkaOpts authenticate every Kafka client of the env (the secured
	// stack's admin); none on the plain stack.
	kafkaOpts []kgo.Opt

	secure bool                   // the secured variant (RequireSecure)
	krbs   map[string]*krb.Client // logged-in principals, by name
}

// EnvPath returns where the env file is: $HIVEDR_STACK_ENV if set, else
// $HIVEDR_STACK_DIR/env, else .stack/env in the module root above the
// working directory.
func EnvPath() (string, error) { return envPath("HIVEDR_STACK_ENV", "HIVEDR_STACK_DIR", ".stack") }

// SecureEnvPath returns where the secured stack's env file is:
// $HIVEDR_SECURE_STACK_ENV if set, else $HIVEDR_SECURE_STACK_DIR/env, else
// .stack-secure/env in the module root above the working directory.
func SecureEnvPath() (string, error) {
	return envPath("HIVEDR_SECURE_STACK_ENV", "HIVEDR_SECURE_STACK_DIR", ".stack-secure")
}

func envPath(fileVar, dirVar, dirName string) (string, error) {
	if p := os.Getenv(fileVar); p != "" {
		return p, nil
	}
	if d := os.Getenv(dirVar); d != "" {
		return filepath.Join(d, "env"), nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, dirName, "env"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Load reads the env file. It does not check that the services answer.
func Load() (*Env, error) {
	path, err := EnvPath()
	if err != nil {
		return nil, err
	}
	return load(path)
}

func load(path string) (*Env, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read stack env file: %w", err)
	}
	defer f.Close()
	e := &Env{Path: path, vars: map[string]string{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: not KEY=VALUE: %q", path, n, line)
		}
		e.vars[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	e.secure = e.vars["HIVEDR_STACK_SECURE"] == "1"
	return e, nil
}

const howToStart = "start the local stack with `make stack-up` (and see `make stack-status`)"

// Require loads the env file and checks that every service's address
// accepts connections, failing t (never skipping) when it does not.
func Require(t testing.TB) *Env {
	t.Helper()
	e, err := Load()
	if err != nil {
		t.Fatalf("local stack is not up: %v; %s", err, howToStart)
	}
	if e.Secure() {
		t.Fatalf("%s is the secured stack's env file; the plain stack's is wanted (unset HIVEDR_STACK_ENV or HIVEDR_STACK_DIR)", e.Path)
	}
	e.check(t, howToStart)
	return e
}

const howToStartSecure = "start the secured stack with `make stack-secure-up` (and see `make stack-secure-status`)"

// RequireSecure loads the secured stack's env file (SecureEnvPath) and
// checks that every service's address accepts connections, failing t
// (never skipping) when it does not. Its Kafka clients (Kafka,
// KafkaAdmin) authenticate as the stack's admin user.
func RequireSecure(t testing.TB) *Env {
	t.Helper()
	path, err := SecureEnvPath()
	var e *Env
	if err == nil {
		e, err = load(path)
	}
	if err != nil {
		t.Fatalf("secured stack is not up: %v; %s", err, howToStartSecure)
	}
	if !e.Secure() {
		t.Fatalf("%s is not a secured stack's env file (no HIVEDR_STACK_SECURE=1); %s", e.Path, howToStartSecure)
	}
	e.check(t, howToStartSecure)
	if e.kafkaOpts, err = connect.Kafka(e.KafkaConfig(t, "admin")); err != nil {
		t.Fatalf("secured stack's Kafka: %v", err)
	}
	return e
}

// Secure reports whether e is the secured stack's.
func (e *Env) Secure() bool { return e.secure }

// KafkaConfig is the secured stack's kafka section for its SCRAM user
// (admin, tailer, copyd, applier, operator): brokers, SASL with the
// user's password file, TLS with the stack's CA.
func (e *Env) KafkaConfig(t testing.TB, user string) config.Kafka {
	t.Helper()
	return config.Kafka{Brokers: e.KafkaBrokers(t), TopicPrefix: "hivedr", ReplicationFactor: 1, ManifestPartitions: 1,
		SASL: config.SASL{Mechanism: e.Get(t, "HIVEDR_KAFKA_SASL_MECHANISM"), User: user,
			PasswordFile: e.Get(t, "HIVEDR_KAFKA_PASSWORD_FILE_"+strings.ToUpper(user))},
		TLS: config.TLS{CAFile: e.Get(t, "HIVEDR_TLS_CA")}}
}

// SchemaRegistry is the stack's schema_registry section: on the secured
// stack with its CA, client certificate and basic-auth user.
func (e *Env) SchemaRegistry(t testing.TB) config.SchemaRegistry {
	t.Helper()
	r := config.SchemaRegistry{URL: e.Get(t, "HIVEDR_SCHEMA_REGISTRY")}
	if e.Secure() {
		r.User, r.PasswordFile = e.Get(t, "HIVEDR_SCHEMA_REGISTRY_USER"), e.Get(t, "HIVEDR_SCHEMA_REGISTRY_PASSWORD_FILE")
		r.TLS = config.TLS{CAFile: e.Get(t, "HIVEDR_TLS_CA"), CertFile: e.Get(t, "HIVEDR_TLS_CLIENT_CERT"),
			KeyFile: e.Get(t, "HIVEDR_TLS_CLIENT_KEY")}
	}
	return r
}

// check fails t unless every service's address accepts connections.
func (e *Env) check(t testing.TB, howToStart string) {
	t.Helper()
	e.owner = t
	keys := []string{
		"HIVEDR_KAFKA_BROKERS",
		"HIVEDR_HMS_SRC", "HIVEDR_HMS_DR",
		"HIVEDR_HDFS_SRC_NAMENODE", "HIVEDR_HDFS_SRC_HTTP",
		"HIVEDR_HDFS_DR_NAMENODE", "HIVEDR_HDFS_DR_HTTP",
		"HIVEDR_S3_ENDPOINT",
	}
	if e.secure {
		keys = append(keys, "HIVEDR_KRB_KDC")
	} else {
		// The second DR site: the plain stack's only.
		keys = append(keys, "HIVEDR_HMS_DR2", "HIVEDR_HDFS_DR2_NAMENODE", "HIVEDR_HDFS_DR2_HTTP")
	}
	for _, key := range keys {
		e.dialOrFail(t, key, howToStart)
	}
}

// dialOrFail fails t unless the address in key accepts connections.
func (e *Env) dialOrFail(t testing.TB, key, how string) {
	t.Helper()
	addr := e.Get(t, key)
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	if i := strings.IndexByte(addr, ','); i >= 0 {
		addr = addr[:i]
	}
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatalf("local stack %s: %s=%s does not answer: %v; %s", e.Path, key, addr, err, how)
	}
	c.Close()
}

// Get returns the value of key, failing t when the env file lacks it.
func (e *Env) Get(t testing.TB, key string) string {
	t.Helper()
	v, ok := e.vars[key]
	if !ok || v == "" {
		t.Fatalf("local stack env file %s has no %s; re-run `make stack-up`", e.Path, key)
	}
	return v
}

// Lookup returns the value of key and whether it is set.
func (e *Env) Lookup(key string) (string, bool) {
	v, ok := e.vars[key]
	return v, ok
}

// KafkaBrokers returns the seed brokers.
func (e *Env) KafkaBrokers(t testing.TB) []string {
	return strings.Split(e.Get(t, "HIVEDR_KAFKA_BROKERS"), ",")
}

// Kafka returns a client for the stack's broker with opts added; it is
// closed when the test ends.
func (e *Env) Kafka(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := append([]kgo.Opt{kgo.SeedBrokers(e.KafkaBrokers(t)...)}, e.kafkaOpts...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// KafkaAdmin returns an admin client. Tests poll with it, so one client is
// shared for the whole test that called Require (closed when it ends)
// rather than one made, and kept open, per call.
func (e *Env) KafkaAdmin(t testing.TB) *kadm.Client {
	if e.owner == nil {
		return kadm.NewClient(e.Kafka(t))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.admin == nil {
		e.admin = kadm.NewClient(e.Kafka(e.owner))
	}
	return e.admin
}

// HMS connects to the site's metastore; the connection is closed when the
// test ends. On the secured stack it authenticates as the test principal.
func (e *Env) HMS(t testing.TB, site Site) *hms.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := hms.Dial(ctx, e.Get(t, "HIVEDR_HMS_"+string(site)), e.HMSOptions(t))
	if err != nil {
		t.Fatalf("%v; %s", err, howToStart)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// HDFS returns a native HDFS client for the site's cluster, acting as user
// "hivedr"; it is closed when the test ends.
func (e *Env) HDFS(t testing.TB, site Site) *hdfs.Client {
	t.Helper()
	addr := e.Get(t, "HIVEDR_HDFS_"+string(site)+"_NAMENODE")
	opts := hdfs.ClientOptions{Addresses: []string{addr}, User: "hivedr"}
	if e.secure {
		spn, _, _ := strings.Cut(e.Get(t, "HIVEDR_HDFS_NN_PRINCIPAL"), "@")
		opts = hdfs.ClientOptions{Addresses: []string{addr}, KerberosClient: e.Krb(t, TestPrincipal).GoKrb5(),
			KerberosServicePrincipleName: spn, DataTransferProtection: e.Get(t, "HIVEDR_HDFS_"+string(site)+"_PROTECTION")}
	}
	c, err := hdfs.NewClient(opts)
	if err != nil {
		t.Fatalf("hdfs client for %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// WebHDFS returns a WebHDFS client for the site's cluster, acting as the
// HDFS superuser of the local stack (snapshots need one).
func (e *Env) WebHDFS(t testing.TB, site Site) *webhdfs.Client {
	t.Helper()
	if e.secure {
		return webhdfs.New(e.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"), "", e.httpClient(t, site))
	}
	return webhdfs.New(e.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"), e.superuser(), nil)
}

// HDFSSuperuser is the local stack's HDFS superuser (the user its
// NameNodes run as; HIVEDR_HDFS_SUPERUSER, default root).
func (e *Env) HDFSSuperuser() string { return e.superuser() }

func (e *Env) superuser() string {
	if u, ok := e.vars["HIVEDR_HDFS_SUPERUSER"]; ok && u != "" {
		return u
	}
	return "root"
}

// S3 returns a client for the stack's S3 server (path-style addressing).
func (e *Env) S3(t testing.TB) *s3.Client {
	t.Helper()
	region := "us-east-1"
	if r, ok := e.vars["HIVEDR_S3_REGION"]; ok && r != "" {
		region = r
	}
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(e.Get(t, "HIVEDR_S3_ENDPOINT")),
		Region:       region,
		UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(
			e.Get(t, "HIVEDR_S3_ACCESS_KEY"), e.Get(t, "HIVEDR_S3_SECRET_KEY"), ""),
	})
}

// WriteHDFS writes data to a new file at p (parents created) with the
// cluster's default block size, retrying Close while the NameNode still
// waits for the last block's replicas (hdfs.ErrReplicating).
func WriteHDFS(t testing.TB, c *hdfs.Client, p string, data []byte) {
	t.Helper()
	if err := c.MkdirAll(path.Dir(p), 0o755); err != nil {
		t.Fatalf("hdfs mkdir %s: %v", path.Dir(p), err)
	}
	w, err := c.Create(p)
	if err != nil {
		t.Fatalf("hdfs create %s: %v", p, err)
	}
	// An empty Write would still allocate a block that never completes.
	if len(data) > 0 {
		if _, err := w.Write(data); err != nil {
			t.Fatalf("hdfs write %s: %v", p, err)
		}
	}
	deadline, wait := time.Now().Add(time.Minute), 20*time.Millisecond
	for {
		err = w.Close()
		if err == nil {
			return
		}
		if !hdfs.IsErrReplicating(err) || time.Now().After(deadline) {
			t.Fatalf("hdfs close %s: %v", p, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// HDFSCRC returns a client that reads COMPOSITE-CRC32C file checksums from
// the site's DataNodes.
func (e *Env) HDFSCRC(t testing.TB, site Site) *hdfscrc.Client {
	t.Helper()
	if e.secure {
		c := hdfscrc.New(e.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"), "", e.httpClient(t, site))
		c.DataTransferProtection = e.Get(t, "HIVEDR_HDFS_"+string(site)+"_PROTECTION")
		return c
	}
	return hdfscrc.New(e.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"), e.superuser(), nil)
}

// httpClient returns the WebHDFS client of the secured stack: the stack's
// CA, SPNEGO as the test principal. It builds it as fs does, from the
// cluster's fs.HDFSConfig.
func (e *Env) httpClient(t testing.TB, site Site) *http.Client {
	t.Helper()
	h, err := fs.NewHDFS(e.HDFSConfig(t, site, e.Krb(t, TestPrincipal)))
	if err != nil {
		t.Fatal(err)
	}
	return h.HTTPClient()
}
