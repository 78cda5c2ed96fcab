package memqueue_test

import (
	"testing"

	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/queue/queuetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	queuetest.Exercise(t, func(t *testing.T, capacity int) queue.Queue { return memqueue.New(capacity) })
}
