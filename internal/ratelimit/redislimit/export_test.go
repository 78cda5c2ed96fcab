package redislimit

// GlobEscape is globEscape, for the test that holds it to Redis's MATCH.
var GlobEscape = globEscape
