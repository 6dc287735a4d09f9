package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tool finds a command the deployment checks run: on PATH, or where `go
// install` puts it (GOBIN when set, else GOPATH/bin: deploy/tools.sh
// installs helm there). A missing tool fails the test: `make tools`
// installs them all (deploy/tools.sh).
func tool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	env, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		t.Fatalf("%s is not on PATH, and go env GOBIN GOPATH failed: %v", name, err)
	}
	gobin, gopath, _ := strings.Cut(string(env), "\n")
	dirs := goInstallDirs(gobin, gopath)
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s is not on PATH nor in %v: run `make tools` (deploy/tools.sh installs helm, promtool and prometheus)", name, dirs)
	return ""
}

// goInstallDirs are where `go install` puts commands, as deploy/tools.sh
// looks for them: GOBIN when set, else the bin directory of GOPATH's first
// entry.
func goInstallDirs(gobin, gopath string) []string {
	if gobin = strings.TrimSpace(gobin); gobin != "" {
		return []string{gobin}
	}
	first, _, _ := strings.Cut(strings.TrimSpace(gopath), string(filepath.ListSeparator))
	if first == "" {
		return nil
	}
	return []string{filepath.Join(first, "bin")}
}

func run(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(tool(t, name), args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s%s", name, args, err, out, stderr.String())
	}
	return out
}

// TestToolsGoInstallDirs: the tests look where deploy/tools.sh installs
// helm: GOBIN when set, else GOPATH's first entry's bin.
func TestToolsGoInstallDirs(t *testing.T) {
	sep := string(filepath.ListSeparator)
	for _, c := range []struct {
		gobin, gopath string
		want          []string
	}{
		{"/opt/gobin\n", "/root/go\n", []string{"/opt/gobin"}},
		{"", "/root/go\n", []string{"/root/go/bin"}},
		{"  ", "/a" + sep + "/b", []string{"/a/bin"}},
		{"", "", nil},
	} {
		if got := goInstallDirs(c.gobin, c.gopath); !slices.Equal(got, c.want) {
			t.Errorf("goInstallDirs(%q, %q) = %v, want %v", c.gobin, c.gopath, got, c.want)
		}
	}
	// And tool() uses it: a helm only in GOBIN is found.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hivedr-fake-tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOBIN", dir)
	if got := tool(t, "hivedr-fake-tool"); got != filepath.Join(dir, "hivedr-fake-tool") {
		t.Errorf("tool found %q, want it in GOBIN %s", got, dir)
	}
}
