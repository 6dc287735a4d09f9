package copyd

import (
	"context"
	"errors"
	iofs "io/fs"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/webhdfs"
)

// permanentError is a failure that no retry can mend: a path outside the
// roots, a directory where a file should be, a location no store serves.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// permanent marks err as not worth retrying.
func permanent(err error) error { return &permanentError{err} }

// mismatchError is a checksum or length disagreement found while
// verifying a copy. It is retried (the source may have been caught in the
// middle of a rewrite, or a byte flipped in transit), and once retries are
// exhausted it is the completion's error, naming both values.
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string { return e.msg }

// vanishedError is a file that was there when the attempt looked and gone
// when it copied: the source removed or replaced under the copy (a drop,
// an overwrite, a compaction's cleaner), or the target's directory
// removed. The next attempt looks again and decides from what it finds
// then: the bytes in the change-management root or a snapshot, or
// SOURCE_GONE.
type vanishedError struct{ err error }

func (e *vanishedError) Error() string { return e.err.Error() + " (gone since the attempt looked)" }
func (e *vanishedError) Unwrap() error { return e.err }

// retryable reports whether err may go away if the attempt is made again:
// network faults and timeouts, 5xx answers, throttling, HDFS standby and
// safe mode, checksum mismatches, a file gone between an attempt's look
// and its copy (vanishedError), and errors nobody classified (retries are
// bounded, so a wrong guess costs time, not correctness). Missing files,
// permissions, invalid arguments, 4xx answers and confinement refusals are
// permanent. The end of the caller's own context is not retryable either.
func retryable(err error) bool {
	var pe *permanentError
	var me *mismatchError
	var ve *vanishedError
	var re *webhdfs.RemoteError
	var ce *fs.ChecksumError
	switch {
	case err == nil:
		return false
	case errors.As(err, &pe):
		return false
	case errors.As(err, &me), errors.As(err, &ce), errors.As(err, &ve):
		return true
	case errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, iofs.ErrNotExist),
		errors.Is(err, iofs.ErrPermission), errors.Is(err, iofs.ErrInvalid),
		errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR):
		return false
	case errors.As(err, &re):
		switch re.Exception {
		case "StandbyException", "RetriableException", "SafeModeException", "ConnectException":
			return true
		case "FileNotFoundException", "AccessControlException", "IllegalArgumentException",
			"InvalidPathException", "PathIsNotEmptyDirectoryException", "ParentNotDirectoryException":
			return false
		}
		return statusRetryable(re.Status)
	}
	var sc interface{ HTTPStatusCode() int } // smithy-go (S3) response errors
	if errors.As(err, &sc) && sc.HTTPStatusCode() != 0 {
		return statusRetryable(sc.HTTPStatusCode())
	}
	// Network errors (net.Error, resets, timeouts, including a store's
	// own per-request deadline) and anything unclassified: retry.
	return true
}

// statusRetryable classifies an HTTP status: 5xx, 408 and 429 are worth
// another try, other 4xx are not.
func statusRetryable(code int) bool {
	switch {
	case code >= 500, code == 408, code == 429:
		return true
	case code >= 400:
		return false
	}
	return true
}

// backoff returns how long to wait before attempt number attempt+1 (after
// attempt failures): initial doubled per failure, capped at max, with half
// of it random ("equal jitter") so that daemons retrying a shared fault do
// not come back in step.
func backoff(attempt int, initial, maxDelay time.Duration) time.Duration {
	d := initial
	for i := 1; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}
