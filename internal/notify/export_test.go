package notify

// Receivers returns how many receiving connections r holds: the classic
// one and the shards' that run. For the tests of package notify_test.
func (r *Redis) Receivers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return 1 + len(r.shards)
}
