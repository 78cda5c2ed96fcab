package redisqueue

// PopScript lets a test run what a Pop of a queue of one shard runs in
// Redis without the Pop: a consumer that took an item and lost the reply
// (or died at once).
var PopScript = plainScripts.pop

// GuardedPopScript is what a Pop of a queue of several shards runs.
var GuardedPopScript = guardedScripts.pop
