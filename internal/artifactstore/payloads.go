package artifactstore

// PutResult is a put_artifact receipt's result: the bytes stored. It is
// the schema of that action's result in the API (httpapi's runPayloads).
type PutResult struct {
	Digest string `json:"digest" doc:"The artifact's digest."`
	Size   int64  `json:"size" doc:"Its size in bytes."`
}
