// Package agent is the node agent: the process `sluice agent` runs on each
// host, and the half of the node task protocol that takes a task's host
// step. It joins once with a join token and keeps the node's credential in
// its data dir, heartbeats with what runs on the host, long-polls the
// control plane's API for its node's tasks, takes each step on its host
// (package hoststep, with the runtimes the host has) and posts the result.
//
// The control plane's half of the protocol (dispatch, wait, claim, results
// in PostgreSQL) is package nodetask; the words both halves say are package
// nodeproto. serve runs an executor of this package for its own node too,
// claiming from the database instead of the API (nodetask.Local).
//
// An agent reaches the control plane only through its API, with the node's
// credential: it cannot reach a database, a journal, a Git credential or
// River, and that is a security property of an edge host, so it is checked.
// TestImports fails the build if this package imports, directly or not,
// sluice/db, sluice/queries, sluice/internal/journal, sluice/internal/gitops,
// sluice/internal/source, sluice/internal/secretbox, pgx or River.
package agent
