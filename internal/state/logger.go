package state

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleLogger sends Pebble's messages to slog instead of the standard
// library's log (which printed "Found 0 WALs" and the like into the
// daemons' structured output): information at debug level, errors as
// errors. Fatalf logs and exits, as Pebble's default does.
type pebbleLogger struct{}

var _ pebble.Logger = pebbleLogger{}

func (pebbleLogger) Infof(format string, args ...any) {
	slog.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (pebbleLogger) Errorf(format string, args ...any) {
	slog.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (pebbleLogger) Fatalf(format string, args ...any) {
	slog.Error(fmt.Sprintf(format, args...), "component", "pebble", "fatal", true)
	os.Exit(1)
}
