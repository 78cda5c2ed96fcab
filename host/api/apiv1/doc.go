// Package apiv1 is the wire contract of Weft's HTTP API, version 1: the
// JSON documents that the API under /v1 answers and accepts — an instance
// as the API shows it, a page of a list, a history entry, a log line, a
// stimulus, a workflow or plugin summary, the grants of a plugin, a
// schedule and its record, the concurrency keys of workflows and steps
// with their holders and lines, the rate limit keys, the registered search
// attributes, a batch job and its items, an instance's reset points and a
// migration's plan, what an event, a refresh or a backfill did, and the
// problem document of an error answer.
//
// The API (host/api) encodes these types and the Go client (host/client)
// decodes them, so that a shape is declared once and both ends agree on
// it; host/api/openapi.json describes the same documents, and this
// package's tests check every type against it, field by field and enum by
// enum. The package is versioned with the URL: a change that breaks a
// client of /v1 belongs to a /v2 and a package apiv2 beside this one.
//
// It imports the standard library only, so that a program that talks to
// a host links nothing of the host.
package apiv1
