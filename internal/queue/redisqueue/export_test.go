package redisqueue

// PopScript lets a test run what a Pop runs in Redis without the Pop: a
// consumer that took an item and lost the reply (or died at once).
var PopScript = popScript
