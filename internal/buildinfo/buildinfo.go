// Package buildinfo says which build of hivedr is running: the version,
// commit and build date stamped into the binary at link time, and the
// hivedr_build_info metric that carries them to Prometheus.
//
// The three values are package variables only because the linker can set
// nothing else: `go build -ldflags "-X
// github.com/hivedr/hivedr/internal/buildinfo.version=v1.2.0 ..."` (the
// Makefile's build and image targets do it). Nothing assigns them at run
// time; read them through Get.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set by the linker (-ldflags -X); empty in a plain `go build`.
var (
	version string
	commit  string
	date    string
)

// Info is one build's identity.
type Info struct {
	Version   string // v1.2.0, or a git describe; "(devel)" when not stamped
	Commit    string // the full commit hash; "unknown" when not known
	Date      string // build time, RFC 3339 UTC; "unknown" when not stamped
	GoVersion string
}

// Get returns the running binary's build information: the linker's values,
// else what the Go toolchain recorded (the module version of a `go
// install`, the VCS commit and time of a build in a git work tree).
func Get() Info {
	in := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if in.Version == "" && bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && in.Commit == "":
				in.Commit = s.Value
			case s.Key == "vcs.time" && in.Date == "":
				in.Date = s.Value
			}
		}
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	if in.Date == "" {
		in.Date = "unknown"
	}
	return in
}

// String is the line `hivedr version` prints.
func (in Info) String() string {
	return "hivedr " + in.Version + " (commit " + in.Commit + ", built " + in.Date + ", " + in.GoVersion + ")"
}

// Collector is the hivedr_build_info gauge of a process of role (tail,
// copyd, apply): always 1, the build and the role in its labels, so a
// query can join it to any other series of the process, and an alert can
// tell that no process of a role is up (absent(hivedr_build_info{role="apply"})).
func (in Info) Collector(role string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hivedr_build_info",
		Help: "Always 1; the labels name the process's role (tail, copyd, apply) and its build (version, commit, build date, Go version).",
		ConstLabels: prometheus.Labels{
			"role": role, "version": in.Version, "commit": in.Commit, "date": in.Date, "goversion": in.GoVersion,
		},
	})
	g.Set(1)
	return g
}
