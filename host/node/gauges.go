package node

import (
	"fmt"

	"github.com/weftworks/weft/internal/metrics"
)

// instrumentStore decorates the node's store to time its operations
// (metrics.InstrumentStore) and registers the store gauges, instances by
// status and stimuli queued and dead (metrics.WatchStore), read through
// the decorated store so that their cost shows among the operations. It
// does nothing on a node without metrics. Open calls it once the metrics
// exist and before it creates the engine, which must get the decorated
// store; the decorator keeps the store's barrier and sweep stripes, and
// n.local stays the embedded store itself, for backups.
func (n *Node) instrumentStore() error {
	if n.metrics == nil {
		return nil
	}
	n.store = metrics.InstrumentStore(n.store, n.metrics)
	if err := n.metrics.WatchStore(n.store, metrics.GaugeConfig{Now: n.now, Logger: n.log}); err != nil {
		return fmt.Errorf("node: metrics: %w", err)
	}
	return nil
}
