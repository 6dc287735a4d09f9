package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/colinmarc/hdfs/v2"
)

// EventMarkAttr is the extended attribute in which a store keeps, with a
// file copyd wrote, the ID of the source event the copy was made for.
//
// The applier's prunes read it: a file in a directory being pruned that a
// later event's copy wrote (copied ahead of its metadata, its completion
// not read yet) is kept, however far behind the applier's look-ahead that
// event is. HDFS and local filesystems keep the mark; S3 targets do not
// (a prune there goes by the completions it has read).
const EventMarkAttr = "user.hivedr.event"

// EventMarkWriter is a Writer that marks the file it writes with an
// event's ID (EventMarkAttr) before the file becomes visible at its path.
type EventMarkWriter interface {
	MarkEvent(eventID int64)
}

// EventMarks reads and sets the marks of files that exist.
type EventMarks interface {
	// EventMark returns the mark of the file at loc; ok is false when it
	// has none (a file no copy of this version wrote, a store that keeps
	// none).
	EventMark(ctx context.Context, loc string) (id int64, ok bool, err error)
	// SetEventMark marks the file at loc with eventID.
	SetEventMark(ctx context.Context, loc string, eventID int64) error
}

// xattrsOff reports whether err is a NameNode refusing extended
// attributes because they are disabled (dfs.namenode.xattrs.enabled).
func xattrsOff(err error) bool {
	return err != nil && strings.Contains(err.Error(), "dfs.namenode.xattrs.enabled")
}

// setMark marks the HDFS file at p (a staging file or a file in place).
func (h *HDFS) setMark(c *hdfs.Client, loc, p string, eventID int64) error {
	if eventID <= 0 || h.marksOff.Load() {
		return nil
	}
	err := c.SetXAttr(p, EventMarkAttr, strconv.FormatInt(eventID, 10))
	if xattrsOff(err) {
		h.marksOff.Store(true) // marks are an aid to prunes: without them, prunes go by completions
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark %s with event %d: %w", loc, eventID, err)
	}
	return nil
}

// EventMark implements EventMarks.
func (h *HDFS) EventMark(ctx context.Context, loc string) (int64, bool, error) {
	p, err := h.path(loc)
	if err != nil {
		return 0, false, err
	}
	if h.marksOff.Load() {
		return 0, false, nil
	}
	c, err := h.conn(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("event mark of %s: %w", loc, err)
	}
	attrs, err := c.ListXAttrs(p)
	switch {
	case xattrsOff(err):
		h.marksOff.Store(true)
		return 0, false, nil
	case errors.Is(err, os.ErrNotExist):
		return 0, false, fmt.Errorf("event mark of %s: %w", loc, ErrNotExist)
	case err != nil:
		return 0, false, fmt.Errorf("event mark of %s: %w", loc, err)
	}
	return parseMark(loc, attrs[EventMarkAttr], attrs[EventMarkAttr] != "")
}

// SetEventMark implements EventMarks.
func (h *HDFS) SetEventMark(ctx context.Context, loc string, eventID int64) error {
	p, err := h.path(loc)
	if err != nil {
		return err
	}
	c, err := h.conn(ctx)
	if err != nil {
		return fmt.Errorf("mark %s: %w", loc, err)
	}
	return h.setMark(c, loc, p, eventID)
}

func parseMark(loc, v string, ok bool) (int64, bool, error) {
	if !ok {
		return 0, false, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("event mark of %s: %s=%q is not an event ID", loc, EventMarkAttr, v)
	}
	return id, true, nil
}

// setMarkLocal marks the local file at p; a filesystem without user
// extended attributes keeps no mark.
func setMarkLocal(loc, p string, eventID int64) error {
	if eventID <= 0 {
		return nil
	}
	err := syscall.Setxattr(p, EventMarkAttr, []byte(strconv.FormatInt(eventID, 10)), 0)
	if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark %s with event %d: %w", loc, eventID, err)
	}
	return nil
}

// EventMark implements EventMarks.
func (l *Local) EventMark(_ context.Context, loc string) (int64, bool, error) {
	p, err := localPath(loc)
	if err != nil {
		return 0, false, err
	}
	buf := make([]byte, 32)
	n, err := syscall.Getxattr(p, EventMarkAttr, buf)
	switch {
	case errors.Is(err, syscall.ENODATA), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EOPNOTSUPP):
		return 0, false, nil
	case errors.Is(err, syscall.ENOENT):
		return 0, false, fmt.Errorf("event mark of %s: %w", loc, ErrNotExist)
	case err != nil:
		return 0, false, fmt.Errorf("event mark of %s: %w", loc, err)
	}
	return parseMark(loc, string(buf[:n]), true)
}

// SetEventMark implements EventMarks.
func (l *Local) SetEventMark(_ context.Context, loc string, eventID int64) error {
	p, err := localPath(loc)
	if err != nil {
		return err
	}
	return setMarkLocal(loc, p, eventID)
}

// EventMark implements EventMarks for the store holding loc; a store
// that keeps no marks answers ok false.
func (r *Router) EventMark(ctx context.Context, loc string) (int64, bool, error) {
	f, l, err := r.Split(loc)
	if err != nil {
		return 0, false, err
	}
	m, ok := f.(EventMarks)
	if !ok {
		return 0, false, nil
	}
	return m.EventMark(ctx, l)
}

// SetEventMark implements EventMarks for the store holding loc; a store
// that keeps no marks is left as it is.
func (r *Router) SetEventMark(ctx context.Context, loc string, eventID int64) error {
	f, l, err := r.Split(loc)
	if err != nil {
		return err
	}
	if m, ok := f.(EventMarks); ok {
		return m.SetEventMark(ctx, l, eventID)
	}
	return nil
}
