package hoststep

import "sluice/internal/servicespec"

// Compose is what the compose runtime adds to a service's manifest: one
// Compose project, its files as the synced commit holds them; nil for any
// other runtime. The manifest's ArtifactDigest is the project's identity
// (Identity: its files and its pins), its Env and Secrets the variables the
// Compose files interpolate, handed to the Compose process and never
// written. It is servicespec's type, which the control plane reads from
// the commit in force.
type (
	Compose     = servicespec.ComposeProject
	ComposeFile = servicespec.ComposeFile
)
