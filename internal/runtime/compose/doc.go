// Package compose is the compose runtime: a service is one Compose project
// on its node, run by Compose (the v2 plugin, `docker compose`, or v1,
// `docker-compose`) against a Docker or Podman engine, and proven and
// inspected through the engine's own API.
package compose
