// Package compose is the compose runtime: a service is one Compose project
// on its node, run by Compose (the v2 plugin, `docker compose`, or v1,
// `docker-compose`, whichever the node has, v2 first) against a Docker or
// Podman engine, and proven and inspected through the engine's own API
// (the moby client), never by scraping Compose's output.
//
// It implements hoststep.Runtime and hoststep.ArtifactFetcher: the engine
// pulls every pinned image by digest, with the service's pull secret, and
// checks it as it pulls, so the host's artifact store is not asked.
//
// The rendered unit is a JSON Spec: the service, the project name
// (sluice-<service>), the identity (hoststep.Compose.Identity, the
// manifest's ArtifactDigest), the files with their content, the Compose and
// env files in order, the project directory, the pins, the generated
// override and the manifest's environment with secret references, never
// their values. It is self-contained: a Restore writes everything again
// from it.
//
// Each unit is an immutable generation directory under
// Dir/<service>/generations/<first 16 hex of the unit's hash>: the
// project's files at their repository paths, the override
// (.sluice-override.yml, merged last: every pinned Compose service's image
// by digest, and the labels io.sluice.service, io.sluice.digest and
// io.sluice.compose-service on every Compose service), the unit
// (.sluice-unit.json) and the marker (.sluice-stack.json) naming the
// project and the service, which Dir/<service> holds too. A directory of
// the service's name without a matching marker is someone else's: a name
// conflict, reported and never touched; so are containers of the project's
// name without sluice's labels, before the service's first generation. Dir/<service>/current, a symlink
// swapped atomically, names the generation that last came up; earlier ones
// stay (Keep of them) for a rollback.
//
// Compose's process gets the manifest's environment and the secrets'
// values as its own environment, for interpolation, and DOCKER_HOST, the
// runtime's engine; nothing of it is written to disk. Validate runs
// Compose's config with the exact invocation Activate's up uses, on a copy
// of the generation in a temporary directory.
//
// What runs is proven per Compose service: each container's image, by the
// engine's image id and its repo digests, against the service's pin, and
// every container's io.sluice.digest against the identity. A Compose
// service without a pin (its files' image, or a build) runs unverified,
// which the proof says without failing.
//
// An instance is one up: its containers as they started. It has exited
// when one of them ended with another code than 0, was removed or started
// again, or when all of them ended; a container that finished with code 0
// while others run is a one-off task, not a failure. Its last lines are the
// failed container's logs, else the first's.
//
// Stop and Remove never delete a
// volume, named or bound, and no image is ever removed.
package compose
