package redisqueue

// PopScript lets a test run what a Pop of a queue of one shard runs in
// Redis without the Pop: a consumer that took an item and lost the reply
// (or died at once).
var PopScript = plainScripts.pop

// GuardedPopScript is what a Pop of a queue of several shards runs.
var GuardedPopScript = guardedScripts.pop

// WaitingOn returns the shards on whose wake stream a Pop of q waits now.
func (q *Queue) WaitingOn() []int {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []int
	for _, s := range q.shards {
		if s.waiters > 0 {
			out = append(out, s.index)
		}
	}
	return out
}

// Down returns the shards whose last call failed, which q's Pops leave to
// probes.
func (q *Queue) Down() []int {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []int
	for _, s := range q.shards {
		if s.down {
			out = append(out, s.index)
		}
	}
	return out
}
