// Package batch is the pure core of batch jobs: the document an operator
// writes to apply one operation to many instances (which operation, over
// which instances, at which rate, and the operation's arguments), the
// state the stepper keeps between two chunks, the rate budget of a chunk,
// and the status rules that decide whether an instance takes the
// operation.
//
// Nothing here reads a clock, a store or the network: the stepper
// (internal/engine) hands in the time and the instances' statuses, and
// persists what comes back in the batch's record (weft.Batch: Document is
// a Document's Canonical form, State an encoded State).
//
// # Exactly once
//
// Each selected instance is an item of the batch, pending until the
// stepper applies it. The store writes an item's outcome and the inbox
// messages that carry its operation in one transaction, and only while
// the item is still pending (store.ApplyBatchItems); the same transaction
// compares and sets the batch's revision, so a stepper that lost the
// batch to another node has its whole chunk refused. A message is
// therefore written at most once per item, whoever steps the batch and
// however often. A stepper that dies before that transaction wrote
// nothing, and the next holder of the sweep re-reads the pending items
// after State.ApplyAfter, so each item is written at least once: once in
// all. The instance then applies each message exactly once, consuming it
// in the commit that records its effect under the instance's lock and
// fencing token, so no operation needs to be idempotent — which matters
// for pause and resume. Precheck only skips instances that cannot take the
// operation; it is re-checked by the execution that applies it.
package batch
