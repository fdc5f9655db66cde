package services

import (
	"sluice/internal/hoststep"
)

// What a host step reports, as receipts keep it (package hoststep).
type (
	ProbeReport   = hoststep.ProbeReport
	Applied       = hoststep.Applied
	ArtifactProof = hoststep.ArtifactProof
)

func short(digest string) string { return hoststep.Short(digest) }
