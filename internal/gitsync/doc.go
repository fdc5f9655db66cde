// Package gitsync keeps a working tree (sluice's config root) equal to a
// branch of a remote Git repository, and says which paths changed.
//
// A Mirror fetches with go-git and then checks out only the paths that
// matter: the tree diff between the commit the working tree holds and the
// fetched one, plus the tracked files that a stat pass over the index finds
// edited or missing. So a sync costs what changed, not what the repository
// holds, and untracked paths (an archive/ directory, anything the remote never
// had) are never touched. go-git's own hard reset is not used because in v5 it
// deletes untracked files, walks the whole working tree, and moves the branch
// before it writes anything.
//
// A sync writes in an order that survives a crash: a marker naming the target
// commit, then the files, then the index (renamed into place), then the
// branch, then the marker is removed. A sync that finds the marker reconciles
// every tracked path instead of trusting the diff. The first sync creates the
// repository under a marker of its own, and one that finds it starts the
// repository again; and every sync first mends what a kill in the middle of
// go-git's own writes leaves (empty refs, a pack index without its pack). A
// killed sync never stops the next one.
//
// The object store is a copy of the remote's, and is mended as one: a Sync
// or an Export that fails in a way sluice did not word reads the whole store,
// and when it finds an object that cannot be read, does not match its hash
// or is missing, it fetches the branch into a new store, which takes the
// damaged one's place, and tries once more. The working tree and its
// untracked files stay; the next checkout compares every tracked path. A
// repair that fails says so in one sentence, and the next sync tries again.
//
// A sync's memory does not grow with the largest file the repository holds:
// a fetched pack is indexed one object at a time as a stream (packStore,
// in place of go-git's indexer, which holds each object whole), and a blob
// over StreamAbove is read from its pack as it is copied to its file. The
// smaller objects the indexer reads go into go-git's object cache, bounded
// by its size, so that the checkout does not inflate them a second time.
//
// Files are written as their blobs hold them: Git attributes (end-of-line
// conversion, filters such as LFS) are not applied. A submodule becomes an
// empty directory.
//
// Credentials never reach .git/config, an error or a log line: they are taken
// out of the URL, passed to go-git as auth, and registered with the redactor
// that every error text passes through.
package gitsync
