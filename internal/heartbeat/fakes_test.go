package heartbeat_test

import (
	"slices"
	"sync"
	"time"
)

// epoch is where the scripts' time starts; script times are offsets from it.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// pulse is a fake heartbeat record.
type pulse struct {
	mu      sync.Mutex
	details []byte
	at      time.Time
	beats   uint64
}

func (p *pulse) Last() ([]byte, time.Time, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.details), p.at, p.beats
}

func (p *pulse) beat(at time.Time, details string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at, p.beats = at, p.beats+1
	if details != "" {
		p.details = []byte(details)
	}
}
