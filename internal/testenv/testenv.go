// Package testenv gives tests the local real stack that `make stack-up`
// starts (e2e/stack/stack.sh): its addresses, read from the generated env
// file ($HIVEDR_STACK_ENV, else $HIVEDR_STACK_DIR/env, else .stack/env in
// the module's root), and ready clients for each service.
//
// A test that needs the stack calls Require. When the stack is not up the
// test fails (it never skips) with a message that says how to start it.
package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
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

	"github.com/hivedr/hivedr/internal/hdfscrc"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/webhdfs"
)

// Site names one side of replication.
type Site string

// The two sites of the local stack.
const (
	Source Site = "SRC"
	DR     Site = "DR"
)

// Env holds the addresses of the local stack.
type Env struct {
	// Path is the env file the addresses were read from.
	Path string
	vars map[string]string

	owner testing.TB // the test that called Require
	mu    sync.Mutex
	admin *kadm.Client // shared by the owner's test and its subtests
}

// EnvPath returns where the env file is: $HIVEDR_STACK_ENV if set, else
// $HIVEDR_STACK_DIR/env, else .stack/env in the module root above the
// working directory.
func EnvPath() (string, error) {
	if p := os.Getenv("HIVEDR_STACK_ENV"); p != "" {
		return p, nil
	}
	if d := os.Getenv("HIVEDR_STACK_DIR"); d != "" {
		return filepath.Join(d, "env"), nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".stack", "env"), nil
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
	e.owner = t
	for _, key := range []string{
		"HIVEDR_KAFKA_BROKERS",
		"HIVEDR_HMS_SRC", "HIVEDR_HMS_DR",
		"HIVEDR_HDFS_SRC_NAMENODE", "HIVEDR_HDFS_SRC_HTTP",
		"HIVEDR_HDFS_DR_NAMENODE", "HIVEDR_HDFS_DR_HTTP",
		"HIVEDR_S3_ENDPOINT",
	} {
		addr := e.Get(t, key)
		if u, err := url.Parse(addr); err == nil && u.Host != "" {
			addr = u.Host
		}
		if i := strings.IndexByte(addr, ','); i >= 0 {
			addr = addr[:i]
		}
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			t.Fatalf("local stack: %s=%s does not answer: %v; %s", key, addr, err, howToStart)
		}
		c.Close()
	}
	return e
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
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.KafkaBrokers(t)...)}, opts...)...)
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
// test ends.
func (e *Env) HMS(t testing.TB, site Site) *hms.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := hms.Dial(ctx, e.Get(t, "HIVEDR_HMS_"+string(site)), hms.Options{})
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
	c, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{addr}, User: "hivedr"})
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
	return webhdfs.New(e.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"), e.superuser(), nil)
}

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
	return hdfscrc.New(e.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"), e.superuser(), nil)
}
