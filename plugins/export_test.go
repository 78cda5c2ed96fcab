package plugins

// The runtime's bounds on a call's request records, for the external tests.
const (
	MaxRecords           = maxRecords
	MaxRecordMethodBytes = maxRecordMethodBytes
	MaxRecordHostBytes   = maxRecordHostBytes
	MaxRecordPathBytes   = maxRecordPathBytes
)
