// Command image builds hivedr's OCI image without a container engine
// (`make image`): one layer on an empty base holding the static hivedr
// binary, the CA certificates of the build machine, and the passwd and
// group entries of the non-root user it runs as, written as an OCI image
// layout in a tar file. `docker load`, `podman load` and `skopeo copy
// oci-archive:FILE ...` read it.
//
//	go run ./deploy/image -binary bin/linux-amd64/hivedr -out bin/hivedr-image.tar \
//	    -version v1.2.0 -commit $(git rev-parse HEAD) -date 2026-12-03T12:00:00Z
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/hivedr/hivedr/internal/config"
)

// The image's fixed facts, which the Helm chart and compose file rely on.
const (
	// UID and GID of the hivedr user: not root, and not a UID a host
	// user is likely to have (distroless's "nonroot" uses the same).
	UID = 65532
	GID = 65532
	// Home is the user's home and the default state directory's parent
	// ($HOME/.local/state/hivedr/...); mount a volume there.
	Home = "/var/lib/hivedr"
	// BinaryPath is where the entrypoint lives.
	BinaryPath = "/usr/local/bin/hivedr"
	// CACertsPath is where Go's crypto/x509 looks first on Linux.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
)

// Spec says what to build.
type Spec struct {
	Binary                string // a static linux hivedr binary (CGO_ENABLED=0)
	CACerts               string // a PEM bundle: Debian's /etc/ssl/certs/ca-certificates.crt
	Version, Commit, Date string
	Arch                  string // GOARCH of the binary
	Ref                   string // the layout's reference name, e.g. hivedr:v1.2.0
	Source                string // the repository URL for the source label; optional
}

func main() {
	var s Spec
	out := flag.String("out", "bin/hivedr-image.tar", "the OCI image layout tar to write")
	flag.StringVar(&s.Binary, "binary", "", "static linux hivedr binary (required)")
	flag.StringVar(&s.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle (PEM) to put at "+CACertsPath)
	flag.StringVar(&s.Version, "version", "", "version label (required)")
	flag.StringVar(&s.Commit, "commit", "", "commit label (required)")
	flag.StringVar(&s.Date, "date", "", "build date, RFC 3339 (required): image creation time and file times")
	flag.StringVar(&s.Arch, "arch", runtime.GOARCH, "GOARCH of the binary")
	flag.StringVar(&s.Ref, "ref", "", "reference name in the layout (default hivedr:<version>)")
	flag.StringVar(&s.Source, "source", "", "URL of the source repository (label org.opencontainers.image.source)")
	flag.Parse()
	if s.Ref == "" {
		s.Ref = "hivedr:" + s.Version
	}
	if err := Build(s, *out); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("image: wrote %s (%s)\n", *out, s.Ref)
}

// Build writes the image that s describes to out, an OCI image layout in
// a tar file.
func Build(s Spec, out string) error {
	if s.Binary == "" || s.Version == "" || s.Commit == "" || s.Date == "" {
		return errors.New("-binary, -version, -commit and -date are required")
	}
	created, err := time.Parse(time.RFC3339, s.Date)
	if err != nil {
		return fmt.Errorf("-date %q: %w", s.Date, err)
	}
	img, err := Image(s, created)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "hivedr-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": s.Ref})); err != nil {
		return fmt.Errorf("write image to %s: %w", dir, err)
	}
	return tarDir(dir, out)
}

// Image is the image s describes.
func Image(s Spec, created time.Time) (v1.Image, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	certs, err := os.ReadFile(s.CACerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates (Debian's ca-certificates package): %w", err)
	}
	files := []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nhivedr:x:%d:%d:hivedr:%s:/sbin/nologin\n", UID, GID, Home))},
		{name: "etc/group", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:\nhivedr:x:%d:\n", GID))},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: CACertsPath[1:], mode: 0o644, body: certs},
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: BinaryPath[1:], mode: 0o755, body: bin},
		{name: "var/", mode: 0o755},
		{name: "var/lib/", mode: 0o755},
		{name: Home[1:] + "/", mode: 0o700, uid: UID, gid: GID},
	}
	layerTar, err := tarFiles(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "hivedr deploy/image", Comment: "hivedr " + s.Version,
	}}); err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "hivedr",
		"org.opencontainers.image.description": "Disaster-recovery replication of Hive metastores over Kafka",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.revision":    s.Commit,
		"org.opencontainers.image.created":     s.Date,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if s.Source != "" {
		labels["org.opencontainers.image.source"] = s.Source
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.OS, cf.Architecture = "linux", s.Arch
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint: []string{BinaryPath},
		Cmd:        []string{"help"},
		WorkingDir: Home,
		Env:        []string{"HOME=" + Home, "PATH=/usr/local/bin"},
		Labels:     labels,
		// The daemons' default metrics addresses (docs/configuration.md);
		// a configuration file moves them off loopback.
		ExposedPorts: map[string]struct{}{config.TailerMetricsPort + "/tcp": {}, config.CopydMetricsPort + "/tcp": {},
			config.ApplierMetricsPort + "/tcp": {}},
	}
	return mutate.ConfigFile(img, cf)
}

// file is one entry of the layer: a directory when name ends in "/".
type file struct {
	name     string
	mode     int64
	body     []byte
	uid, gid int
}

// tarFiles is the layer's tar, every entry stamped with mtime so the same
// inputs make the same layer.
func tarFiles(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: mtime, Format: tar.FormatPAX}
		if f.name[len(f.name)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir to out as a tar, names relative to dir.
func tarDir(dir, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
