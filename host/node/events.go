package node

import (
	"context"

	"github.com/weftworks/weft/host/weft"
)

// Signal sends a stimulus: it resumes the instances waiting for it, or is
// queued until one waits, within its time to live.
func (n *Node) Signal(ctx context.Context, s weft.Event) (*weft.SignalOutcome, error) {
	return n.engine.Signal(ctx, s)
}

// DeadLetters returns a page of the stimuli that expired unclaimed.
func (n *Node) DeadLetters(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	return n.engine.DeadLetters(ctx, cursor, limit)
}

// QueuedStimuli returns a page of the stimuli waiting for an instance.
func (n *Node) QueuedStimuli(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	return n.store.QueuedStimuli(ctx, cursor, limit)
}
