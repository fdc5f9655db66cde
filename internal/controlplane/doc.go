// Package controlplane is the wiring that `sluice serve` and `sluice
// worker` share: the database (a server's, or the embedded one), the
// journal, the domain services, the River client that works their jobs,
// and the long-lived loops around them; and, for serve, the HTTP server
// with River UI.
//
// Every loop is a Service with Start and Stop, as River's own maintenance
// services are, started in one place (ControlPlane.Start) and stopped in
// the reverse order (ControlPlane.Stop), so that the shutdown order can be
// read here and nowhere else. cmd/sluice reads the configuration from the
// environment and keeps only thin mains.
package controlplane
