package copyd

import (
	"context"
	"fmt"

	"github.com/hivedr/hivedr/internal/state"
)

// StagingLog records writes in progress (state.Store), so that a daemon
// restarted after a crash can discard what they left behind
// (DiscardInterrupted). The Engine calls Begin after a target's staging
// file (or multipart upload) is created and before a byte is written, and
// End once it was committed or aborted.
type StagingLog interface {
	Begin(ctx context.Context, taskID, location, staging string) error
	End(ctx context.Context, taskID, location, staging string) error
	// Pending lists the writes begun and not ended.
	Pending() ([]state.Staging, error)
}

// DiscardInterrupted discards the writes in progress that the Engine's
// StagingLog holds: those a crashed or killed run left behind (staging
// files, part files, multipart uploads). A daemon calls it once at start,
// before it copies anything, since every write it lists is then an
// orphan. Each is discarded through its store, then forgotten.
//
// A write whose target lies outside the target roots (they changed since
// it began) is not touched: it is logged and stays recorded, so it is
// discarded once the roots cover it again. The first write that cannot be
// discarded stops the sweep with an error naming it; it stays recorded.
// It returns how many writes were discarded. With no StagingLog there is
// nothing to do.
func (e *Engine) DiscardInterrupted(ctx context.Context) (int, error) {
	if e.cfg.Staging == nil {
		return 0, nil
	}
	pending, err := e.cfg.Staging.Pending()
	if err != nil {
		return 0, fmt.Errorf("list interrupted writes: %w", err)
	}
	n := 0
	for _, p := range pending {
		loc, err := confine("target", p.Location, e.tgt)
		if err != nil {
			e.cfg.Logger.Warn("left an interrupted write in place: its target is outside the target roots",
				"task", p.TaskID, "target", p.Location, "staging", p.Staging)
			continue
		}
		f, path, err := e.r.Split(loc)
		if err == nil {
			err = f.Discard(ctx, path, p.Staging)
		}
		if err != nil {
			return n, fmt.Errorf("discard interrupted write %s of %s (task %s): %w", p.Staging, loc, p.TaskID, err)
		}
		if err := e.cfg.Staging.End(ctx, p.TaskID, p.Location, p.Staging); err != nil {
			return n, err
		}
		n++
		e.cfg.Logger.Info("discarded an interrupted write", "task", p.TaskID, "target", p.Location, "staging", p.Staging)
	}
	return n, nil
}
