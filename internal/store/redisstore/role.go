package redisstore

// role is what a Store is to a partitioned store (partitioned.go): the
// whole store (roleWhole, the layout of one hash tag that the rest of this
// package describes), one of its partitions, or its catalog.
//
// A partitioned store is P partition stores and one catalog store, each a
// Store of this package under its own hash tag, behind a router. The
// scripts are the same for every role; what differs is passed to them as
// an argument where it matters:
//
//   - A partition holds instances and their indexes, no catalog. Its cg is
//     a copy of the catalog's generation: a create carries the generation
//     its catalog reads were made in, and is refused when the partition
//     holds a later one (genOrder), and raises the partition's to its own
//     when it holds an earlier one, so that a partition that missed a copy
//     catches up with the first create that read the new catalog. A
//     commit does not check that the plugins its instance pins exist (they
//     are in the catalog): DeletePlugin fences the partitions first
//     (plugindelete.go). A commit that consumes a queued stimulus leaves a
//     marker (the stimulus is in the catalog, reserved by the router
//     first: stimreserve.go), and the messages it sends to instances of
//     other partitions go into its outbox (outbox.go).
//   - The catalog holds definitions, plugins, grants, search attributes,
//     workflow pauses, schedules, batches, concurrency slots and stimuli,
//     and no instance: the messages its scripts write (Deliver's, a batch's)
//     go into its outbox (outboxMode in the scripts' prelude).
type role uint8

const (
	roleWhole role = iota
	rolePartition
	roleCatalog
)

// String names the role in errors and logs.
func (r role) String() string {
	switch r {
	case roleWhole:
		return "whole"
	case rolePartition:
		return "partition"
	case roleCatalog:
		return "catalog"
	}
	return "unknown"
}

// partitionedSchema marks the catalog of a partitioned store (its schema
// key), so that a build that reads only whole stores refuses it;
// OpenPartitioned moves a whole store into partitions before it marks it
// (migratepartitions.go).
const partitionedSchema = "3p"
