package fs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

// ChecksumError reports a write whose bytes, as the store holds them, do not
// have the CRC32C the caller computed while writing. Commit returns it
// (wrapped) when it refuses to publish.
type ChecksumError struct {
	// Location is the file being written.
	Location string
	// Want is the CRC32C the caller passed to Commit.
	Want uint32
	// Got is the CRC32C of what was written, when known (HasGot).
	Got    uint32
	HasGot bool
	// Detail is what the store said, if it did the check.
	Detail string
}

func (e *ChecksumError) Error() string {
	msg := fmt.Sprintf("checksum mismatch writing %s: caller's CRC32C %08x", e.Location, e.Want)
	if e.HasGot {
		msg += fmt.Sprintf(", written bytes have %08x", e.Got)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// stagingSuffix ends every staging file name. A staging name is
// ".<target name>.hivedr-<16 hex digits>.staging", beside the target.
const (
	stagingInfix  = ".hivedr-"
	stagingSuffix = ".staging"
)

// stagingName returns a new, random staging file name for the target file
// name base.
func stagingName(base string) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("staging name for %s: %w", base, err)
	}
	return "." + base + stagingInfix + hex.EncodeToString(b) + stagingSuffix, nil
}

// isStagingFor reports whether staging (a path) is a staging file of the
// target path: in the same directory and named as stagingName names it.
// Discard checks it so it can never delete anything else.
func isStagingFor(target, staging string) bool {
	dir, base := path.Split(target)
	sdir, sbase := path.Split(staging)
	if dir != sdir || base == "" {
		return false
	}
	prefix := "." + base + stagingInfix
	if !strings.HasPrefix(sbase, prefix) || !strings.HasSuffix(sbase, stagingSuffix) {
		return false
	}
	random := sbase[len(prefix) : len(sbase)-len(stagingSuffix)]
	if len(random) != 16 {
		return false
	}
	_, err := hex.DecodeString(random)
	return err == nil
}

// IsStagingName reports whether the file name (not a path) is one that
// Create gives to staging files, so a sweep of a directory after a crash
// can find leftovers that no saved Staging value names.
func IsStagingName(name string) bool {
	if !strings.HasPrefix(name, ".") || !strings.HasSuffix(name, stagingSuffix) {
		return false
	}
	i := strings.LastIndex(name, stagingInfix)
	if i <= 1 {
		return false
	}
	return isStagingFor("/"+name[1:i], "/"+name)
}
