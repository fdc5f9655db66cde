// Package pglocal runs a private PostgreSQL cluster from the server binaries
// installed on the machine, with no Docker and no system service involved.
//
// It exists for two callers. `sluice serve` uses it as its embedded default
// database, so a single binary plus the distribution's postgresql package is
// enough to run sluice; the data directory is kept across restarts. Tests use
// it to get a throwaway cluster in a temporary directory, usually with
// durability turned off through Opts.Settings.
//
// The cluster listens only on a unix socket inside Opts.Dir, uses trust
// authentication (the socket is reachable only by its owner and root), and is
// guarded by an flock on Dir/sluice.lock, so one process at a time owns it. A
// postmaster left behind by a process that was killed is stopped by the next
// Start. When the calling process is root, initdb, pg_ctl and postgres run as
// the "postgres" OS user (or "nobody" if that does not exist), because initdb
// and postgres refuse to run as root.
package pglocal
