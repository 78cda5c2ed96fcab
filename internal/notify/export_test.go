package notify

// Receivers returns how many receiving connections r holds: the classic
// one and the shards' that run. For the tests of package notify_test.
func (r *Redis) Receivers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return 1 + len(r.shards)
}

// NewRedisBuffered is NewRedis with room for n notifications between the
// receivers and the dispatcher (1024 in NewRedis), so that a test fills
// it with a few.
func NewRedisBuffered(cfg RedisConfig, n int) (*Redis, error) { return newRedis(cfg, n) }

// Buffered returns how many notifications wait in r's buffer for the
// dispatcher.
func (r *Redis) Buffered() int { return len(r.received) }
