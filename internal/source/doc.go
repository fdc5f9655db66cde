// Package source is the vocabulary of the places sluice pulls desired state
// from: a source (a Git repository, branch and path), its settings and their
// seeding from the environment, its credentials and webhook secret (sealed
// at rest with secretbox), its policy (what a sync may do with what it
// fetches), its candidate (a fetch that waits for an operator) and its
// status (the one state it is in, and the evidence for it).
//
// The GitOps settings are the source named "default" (DefaultName); other
// sources are added, changed, suspended and deleted here too.
//
// The mechanics live in package gitops, which imports this one and never
// the other way round: mirroring a repository, the sync that turns a fetch
// into inventory rows, the accept action that writes a candidate into the
// inventory, the interval ticks and the webhook's sync. The line between the
// two: what a word means, how it is checked, stored and shown is here; what
// moves the inventory or asks for a journal run is there. So the policy
// names and the decision lines a receipt records are here, and the policy's
// effect on a sync is there; the candidate record (Candidate, PlanDigest,
// StoredPlan) is here, and its making and accepting are there; a webhook
// delivery is verified and read here (ReadDelivery), and the sync it asks
// for is queued there.
package source
