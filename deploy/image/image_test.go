package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestImageBuildsAndRuns runs `make image` (its recipe, into a temporary
// IMAGE_OUT and IMAGE_BIN, with stamps of its own), unpacks the OCI layout
// tar with nothing but archive/tar and JSON (not the library that wrote
// it), checks the config (user, entrypoint, command, environment, labels,
// exposed ports), and runs `hivedr version` from the binary in its layer.
func TestImageBuildsAndRuns(t *testing.T) {
	dir := t.TempDir()
	ver, commit, date := "v9.8.7-test", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"
	tarPath, bin := filepath.Join(dir, "image.tar"), filepath.Join(dir, "linux", "hivedr")
	mk := exec.Command("make", "--no-print-directory", "-C", "../..", "image",
		"IMAGE_OUT="+tarPath, "IMAGE_BIN="+bin, "VERSION="+ver, "COMMIT="+commit, "DATE="+date)
	out, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "image: wrote "+tarPath+" (hivedr:"+ver+")") {
		t.Errorf("make image did not say it wrote %s:\n%s", tarPath, out)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Errorf("make image did not build the binary at IMAGE_BIN: %v", err)
	}

	blobs := readTar(t, tarPath)
	var index struct {
		Manifests []struct {
			MediaType, Digest string
			Annotations       map[string]string
		}
	}
	mustJSON(t, blobs["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" ||
		index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "hivedr:"+ver {
		t.Fatalf("index.json: %s", blobs["index.json"])
	}
	if !strings.Contains(string(blobs["oci-layout"]), `"imageLayoutVersion"`) {
		t.Errorf("oci-layout: %q", blobs["oci-layout"])
	}
	var manifest struct {
		Config struct{ MediaType, Digest string }
		Layers []struct{ MediaType, Digest string }
	}
	mustJSON(t, blob(t, blobs, index.Manifests[0].Digest), &manifest)
	var config struct {
		Architecture, OS string
		Config           struct {
			User, WorkingDir     string
			Entrypoint, Cmd, Env []string
			Labels               map[string]string
			ExposedPorts         map[string]struct{}
		}
	}
	mustJSON(t, blob(t, blobs, manifest.Config.Digest), &config)
	c := config.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/hivedr"}) || config.OS != "linux" || config.Architecture != runtime.GOARCH {
		t.Errorf("config: user %q entrypoint %q os/arch %s/%s", c.User, c.Entrypoint, config.OS, config.Architecture)
	}
	if !slices.Equal(c.Cmd, []string{"help"}) || c.WorkingDir != "/var/lib/hivedr" || !slices.Contains(c.Env, "HOME=/var/lib/hivedr") {
		t.Errorf("config: cmd %q working dir %q env %q", c.Cmd, c.WorkingDir, c.Env)
	}
	var ports []string
	for p := range c.ExposedPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if want := []string{"9464/tcp", "9465/tcp", "9466/tcp"}; !slices.Equal(ports, want) {
		t.Errorf("exposed ports %v, want %v (the daemons' default metrics addresses)", ports, want)
	}
	for k, want := range map[string]string{"org.opencontainers.image.version": ver, "org.opencontainers.image.revision": commit,
		"org.opencontainers.image.created": date, "org.opencontainers.image.title": "hivedr"} {
		if c.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}
	if len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("layers: %+v", manifest.Layers)
	}

	// Unpack the layer as a runtime would, and run the binary from it.
	root := filepath.Join(dir, "rootfs")
	files := unpackLayer(t, blob(t, blobs, manifest.Layers[0].Digest), root)
	if h := files["var/lib/hivedr/"]; h == nil || h.Uid != 65532 || h.Gid != 65532 {
		t.Errorf("home directory entry %+v, want owned by 65532", h)
	}
	if h := files["usr/local/bin/hivedr"]; h == nil || h.Mode&0o111 == 0 || h.Uid != 0 {
		t.Errorf("binary entry %+v, want an executable owned by root", h)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), "hivedr:x:65532:65532:hivedr:/var/lib/hivedr:") {
		t.Errorf("/etc/passwd: %q", passwd)
	}
	certs, _ := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	if n := strings.Count(string(certs), "BEGIN CERTIFICATE"); n < 50 {
		t.Errorf("CA bundle in the image has %d certificates", n)
	}
	out, err = exec.Command(filepath.Join(root, "usr/local/bin/hivedr"), "version").CombinedOutput()
	want := "hivedr " + ver + " (commit " + commit + ", built " + date + ", "
	if err != nil || !strings.HasPrefix(string(out), want) {
		t.Fatalf("hivedr version from the image: %v %q, want %q...", err, out, want)
	}
	// Static: no interpreter (dynamic loader) in the ELF program headers.
	if elf, _ := os.ReadFile(filepath.Join(root, "usr/local/bin/hivedr")); bytes.Contains(elf, []byte("/lib64/ld-linux")) {
		t.Error("the binary names a dynamic loader: not static")
	}
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[strings.TrimSuffix(h.Name, "/")] = b
	}
}

func blob(t *testing.T, blobs map[string][]byte, digest string) []byte {
	t.Helper()
	alg, hex, _ := strings.Cut(digest, ":")
	b, ok := blobs["blobs/"+alg+"/"+hex]
	if !ok {
		t.Fatalf("blob %s not in the layout", digest)
	}
	return b
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

func unpackLayer(t *testing.T, gz []byte, root string) map[string]*tar.Header {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		p := filepath.Join(root, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, b, os.FileMode(h.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}
