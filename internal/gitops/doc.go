// Package gitops pulls desired state from Git into the unit inventory: the
// sync machinery, beside the source vocabulary of package source.
//
// A sync is a journaled action (SyncArgs; jobs.SyncSourceWorker works it)
// in six named stages (see Sync): fetch mirrors the source's repository
// into its working tree (gitsync; WorkTree), diff finds the paths that
// changed since the last synced commit, and walk reads them as units (unit),
// all outside any transaction; then, in the transaction that finishes the
// run, admit decides what the inventory takes of them, write creates,
// updates and stales its rows (or keeps the change as the source's
// candidate, under a policy that waits for an operator), and finish records
// the synced commit and every path on the receipt. A sync never destroys
// anything. An accept (AcceptArgs) runs the last three stages on a
// candidate's stored plan.
package gitops
