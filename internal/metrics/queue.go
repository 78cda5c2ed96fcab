package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Depther reports a queue's depth; queue.Queue implements it.
type Depther interface {
	Depth(ctx context.Context) (int, error)
}

// WatchQueue registers a gauge that reads the ready queue's depth at each
// scrape. A depth that cannot be read within a second is reported as NaN
// rather than as a number that could be mistaken for the truth.
func (m *Metrics) WatchQueue(q Depther) error {
	return m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "queue_depth",
		Help: "Instances waiting in the ready queue.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n, err := q.Depth(ctx)
		if err != nil {
			return nan()
		}
		return float64(n)
	}))
}
