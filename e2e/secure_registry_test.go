package e2e

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// TestSecureRegistryTLS: the secured stack's registry serves hivedr only
// with everything its configuration asks for: the stack's CA (the
// system's roots do not know it), a client certificate of that CA (mutual
// TLS) and the basic-auth password. Each refusal is an error
// connect.IsAuthError knows, so a daemon stops on it at once: hivedr copyd
// with a wrong registry password exits 1 in seconds naming HTTP 401,
// instead of waiting for the registry. The full configuration registers
// hivedr's schemas and reads one back by ID through a decoder. (Without a
// client certificate, TLS 1.3 lets the refusal reach the client as a
// reset connection rather than the server's alert, depending on timing;
// connect's certCheck then reads the alert, so both ways pass.)
func TestSecureRegistryTLS(t *testing.T) {
	env := testenv.RequireSecure(t)
	ctx := ctxFor(t, 5*time.Minute)
	good := env.SchemaRegistry(t)
	serde, err := connect.Serde(ctx, good)
	if err != nil {
		t.Fatalf("registry over mutual TLS with basic auth: %v", err)
	}
	b, err := serde.Encode(&schemas.TailerCheckpoint{Source: "secure-registry", LastEventID: 7})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := connect.Decoder(good)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := dec.Decode(ctx, b); err != nil {
		t.Fatalf("decode through the secured registry: %v", err)
	} else if cp, ok := v.(*schemas.TailerCheckpoint); !ok || cp.LastEventID != 7 {
		t.Fatalf("decoded %#v", v)
	}

	wrong := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrong, []byte("not-the-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mod  func(r *config.SchemaRegistry)
		want []string // any of them
	}{
		{"the system's roots only", func(r *config.SchemaRegistry) { r.TLS.CAFile = "" }, []string{"unknown authority"}},
		{"no client certificate", func(r *config.SchemaRegistry) { r.TLS.CertFile, r.TLS.KeyFile = "", "" },
			[]string{"certificate required", "bad certificate"}},
		{"wrong password", func(r *config.SchemaRegistry) { r.PasswordFile = wrong }, []string{"HTTP 401"}},
		{"no basic auth", func(r *config.SchemaRegistry) { r.User, r.PasswordFile = "", "" }, []string{"HTTP 401"}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			r := good
			c.mod(&r)
			_, err := connect.Serde(ctx, r)
			if err == nil {
				t.Fatal("the registry served hivedr")
			}
			t.Logf("refused: %v", err)
			if !connect.IsAuthError(err) {
				t.Errorf("connect.IsAuthError(%v) = false: a daemon would wait instead of stopping", err)
			}
			if !slices.ContainsFunc(c.want, func(w string) bool { return strings.Contains(err.Error(), w) }) {
				t.Errorf("error %q says none of %q", err, c.want)
			}
		})
	}

	// A daemon stops on it at once, naming it.
	u := uniq(t)
	p := newSecurePipeline(t, env, []string{"srt_" + u}, 0)
	start := time.Now()
	pr := startHivedrEnv(t, "copyd", append(roleEnv(env, t, roleCopyd), "HIVEDR_REGISTRY_PASSWORD=not-the-password"),
		"copyd", "-config", p.conf, "-state-dir", filepath.Join(t.TempDir(), "copyd"))
	if code := pr.wait(t, time.Minute); code != 1 {
		t.Fatalf("copyd with a wrong registry password exited %d:\n%s", code, tail(pr.out.String(), 20))
	}
	if out := pr.out.String(); !strings.Contains(out, "401") || !strings.Contains(out, env.Get(t, "HIVEDR_SCHEMA_REGISTRY")) {
		t.Errorf("copyd's error names no 401 or registry:\n%s", tail(out, 20))
	}
	p.noSecretIn("copyd", pr.out.String())
	t.Logf("copyd stopped %s after start on the registry's refusal", time.Since(start).Round(100*time.Millisecond))
}

// TestSecureS3DefaultChain: an S3 filesystem without keys in the
// configuration finds its credentials through the AWS SDK's default chain
// (here the environment, then a profile of the shared credentials file,
// named in the configuration or by AWS_PROFILE) and writes and reads
// objects on the stack's S3 server with them; with none to be found its
// requests fail naming the missing credentials rather than going out
// unsigned, and anonymous: true sends unsigned requests, which the server
// refuses. (Web identity and the instance metadata service need AWS STS
// and EC2, which the stack does not have; the SDK's own chain serves them
// unchanged.)
func TestSecureS3DefaultChain(t *testing.T) {
	env := testenv.RequireSecure(t)
	ctx := ctxFor(t, 3*time.Minute)
	bucket := "chain-" + uniq(t)
	admin := env.S3(t)
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	t.Cleanup(func() {
		out, err := admin.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err == nil {
			for _, o := range out.Contents {
				admin.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			}
		}
		admin.DeleteBucket(context.Background(), &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})
	key, secret := env.Get(t, "HIVEDR_S3_ACCESS_KEY"), env.Get(t, "HIVEDR_S3_SECRET_KEY")
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte(fmt.Sprintf("[dr]\naws_access_key_id = %s\naws_secret_access_key = %s\n", key, secret)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Nothing of this machine's own AWS setup takes part.
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "no-config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "no-credentials"),
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	base := fs.S3Config{Endpoint: env.Get(t, "HIVEDR_S3_ENDPOINT"), Region: env.Get(t, "HIVEDR_S3_REGION"), PathStyle: true}
	roundTrip := func(t *testing.T, c fs.S3Config, name string) error {
		t.Helper()
		s, err := fs.NewS3(c)
		if err != nil {
			return err
		}
		loc := "s3://" + bucket + "/" + name
		data := []byte("written with the default credential chain: " + name)
		w, err := s.Create(ctx, loc, int64(len(data)))
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		if err := w.Commit(ctx, crc32.Checksum(data, castagnoli)); err != nil {
			return err
		}
		r, err := s.Open(ctx, loc, 0, -1)
		if err != nil {
			return err
		}
		defer r.Close()
		got, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("read back %q, wrote %q", got, data)
		}
		return nil
	}

	t.Run("environment", func(t *testing.T) {
		t.Setenv("AWS_ACCESS_KEY_ID", key)
		t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
		if err := roundTrip(t, base, "env"); err != nil {
			t.Fatalf("with keys in the environment: %v", err)
		}
	})
	t.Run("shared_profile", func(t *testing.T) {
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
		c := base
		c.Profile = "dr"
		if err := roundTrip(t, c, "profile"); err != nil {
			t.Fatalf("with filesystems.s3[].profile: dr: %v", err)
		}
		t.Setenv("AWS_PROFILE", "dr")
		if err := roundTrip(t, base, "aws-profile"); err != nil {
			t.Fatalf("with AWS_PROFILE=dr: %v", err)
		}
	})
	t.Run("none", func(t *testing.T) {
		err := roundTrip(t, base, "none")
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "credentials") {
			t.Fatalf("with no credentials anywhere: %v, want an error naming the missing credentials", err)
		}
		c := base
		c.Anonymous = true
		if err := roundTrip(t, c, "anonymous"); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
			t.Fatalf("anonymous: %v, want the server's AccessDenied", err)
		}
	})
}
