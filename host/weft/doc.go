// Package weft is the host's vocabulary: the words that the engine, the
// stores, the node, the API, the metrics and the commands share — an
// instance and its status, why it failed, its history entries and log
// lines, a stimulus, a definition's identity. It imports nothing of this
// module, so that naming a status does not mean importing the persistence
// layer (docs/architecture.md, "Glossary").
package weft
