package locallimit

// Keys returns how many keys l keeps a state for, for the tests of its
// memory bound.
func (l *Limiter) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
