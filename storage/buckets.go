package storage

// Buckets filled by later parts of the engine; created at open so every
// reader can rely on them.
var (
	bucketModules  = []byte("modules")
	bucketRuns     = []byte("runs")
	bucketStreams  = []byte("streams")
	bucketPolicies = []byte("policies")
	bucketRequests = []byte("requests")
)
