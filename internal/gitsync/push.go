package gitsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"

	"sluice/internal/errs"
)

// PushResult describes a commit CommitFile pushed.
type PushResult struct {
	Commit   string // the pushed commit (40 hex)
	Parent   string // the remote branch head it was built on
	Attempts int    // 1 unless the remote moved and the edit was re-applied
}

// ErrNoChange is returned by CommitFile when the edit left the file as it
// was, so nothing was committed.
var ErrNoChange = errors.New("the edit left the file as it was; nothing was committed")

// maxPushAttempts bounds how often CommitFile re-applies an edit on a branch
// that other pushers keep moving.
const maxPushAttempts = 5

// remoteLockWait is how long a push through go-git's in-process file
// transport waits for another writer's lock on the branch. Git itself holds
// such a lock for milliseconds.
const remoteLockWait = time.Second

// CommitFile commits an edit of one file to the branch and pushes it,
// without touching the working tree, the index or the local branch: the next
// Sync checks the commit out and reports path as changed.
//
// It fetches origin/<branch>, reads path (repository-relative, forward
// slashes) at its head, and calls edit with the file's bytes. When edit
// returns other bytes, it builds a commit whose parent is that head and
// whose tree differs only in that file's blob (its mode is kept), authored
// and committed by sig at the current time, with message; then it pushes the
// commit to refs/heads/<branch> as a fast-forward that requires the remote
// branch to still be at that head. When the remote moved meanwhile, it
// fetches again and calls edit again on the new head's file, up to 5
// attempts; then it gives up with an *errs.Error of Code errs.Conflict.
//
// Errors: ErrNoChange when edit returned the same bytes; edit's own error,
// wrapped; errs.Invalid for a path that is not a regular file at the head, an
// empty message or an unusable sig; and, as for Sync, errs.Unavailable for
// transport failures, every error redacted. A push the remote refuses while
// the branch stays put (a hook, a protected branch) is reported as it is.
// An error after the push was sent does not prove that it failed: calling
// again with an idempotent edit then returns ErrNoChange.
//
// It takes the same locks as Sync, so it never interleaves with a Sync of
// this or another process. It may move refs/remotes/origin/<branch>, to what
// it fetched or pushed. message gets a final newline, as git writes it.
func (m *Mirror) CommitFile(ctx context.Context, path string, edit func(old []byte) ([]byte, error), message string, sig object.Signature) (*PushResult, error) {
	if err := checkPath(path); err != nil {
		return nil, errs.Errorf(errs.Invalid, "Cannot commit %q: %s; name a file relative to the repository root, with forward slashes.", path, err)
	}
	if strings.TrimSpace(message) == "" {
		return nil, errs.Errorf(errs.Invalid, "The commit message is empty; describe the change.")
	}
	if strings.TrimSpace(sig.Name) == "" || strings.ContainsAny(sig.Name+sig.Email, "<>\n\x00") {
		return nil, errs.Errorf(errs.Invalid, "The commit author %q <%s> cannot be written into a commit; give a name and an email without <, > or line breaks.", sig.Name, sig.Email)
	}
	if !strings.HasSuffix(message, "\n") {
		message += "\n" // as git commit writes it
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.commitFile(ctx, path, edit, message, sig)
	if errors.Is(err, ErrNoChange) {
		return nil, ErrNoChange
	}
	if err != nil {
		return nil, m.scrub(err)
	}
	return res, nil
}

// pushAttempt is a push that failed.
type pushAttempt struct {
	parent, commit plumbing.Hash
	err            error
}

func (m *Mirror) commitFile(ctx context.Context, path string, edit func([]byte) ([]byte, error), message string, sig object.Signature) (*PushResult, error) {
	repo, unlock, err := m.open(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := m.configure(repo); err != nil {
		return nil, err
	}

	// Each round fetches; from the second on, the fetch also tells why the
	// last push failed. A branch that moved means a lost race, so the edit is
	// re-applied; a branch still at the old head means the push itself was
	// refused, which is worth reporting. Reading go-git's error texts would
	// be less reliable: a moved branch shows up as a RequireRemoteRefs
	// mismatch, a non-fast-forward, or receive-pack's "failed to update ref".
	var last *pushAttempt
	for attempt := 1; ; attempt++ {
		head, err := m.fetchHead(ctx, repo)
		if err != nil {
			if last != nil {
				return nil, m.pushError(ctx, last.err)
			}
			return nil, err
		}
		if last != nil {
			if head == last.parent {
				return nil, m.pushError(ctx, last.err)
			}
			if landed(repo, head, last.commit) { // but its report was lost
				return &PushResult{Commit: last.commit.String(), Parent: last.parent.String(), Attempts: attempt - 1}, nil
			}
			m.logger.DebugContext(ctx, "branch moved before the push; re-applying the edit",
				"path", path, "attempt", attempt-1, "expected", last.parent.String(), "found", head.String())
			if attempt > maxPushAttempts {
				return nil, errs.Errorf(errs.Conflict,
					"Branch %s of %s kept moving: %d pushes of %s lost the race to other commits; try again later.",
					m.branch, m.redactor.String(m.ep.url), maxPushAttempts, path)
			}
		}

		commit, err := m.buildCommit(repo, head, path, edit, message, sig)
		if err != nil {
			return nil, err
		}
		err = m.push(ctx, repo, head, commit)
		if err == nil {
			m.logger.DebugContext(ctx, "pushed", "path", path, "commit", commit.String(), "parent", head.String(), "attempts", attempt)
			return &PushResult{Commit: commit.String(), Parent: head.String(), Attempts: attempt}, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("push to %s: %w", m.redactor.String(m.ep.url), ctxErr)
		}
		last = &pushAttempt{parent: head, commit: commit, err: err}
	}
}

// landed reports whether commit is head or one of its recent ancestors: a
// push whose report was lost may have landed, and others may have built on
// it since. Re-applying the edit then would apply it twice.
func landed(repo *git.Repository, head, commit plumbing.Hash) bool {
	const recent = 1000 // commits; an older one cannot be a push of seconds ago
	c, err := repo.CommitObject(head)
	if err != nil {
		return false
	}
	iter := object.NewCommitPreorderIter(c, nil, nil)
	defer iter.Close()
	for range recent {
		c, err := iter.Next()
		if err != nil {
			return false
		}
		if c.Hash == commit {
			return true
		}
	}
	return false
}

// fetchHead fetches the branch as Sync does and returns its head.
func (m *Mirror) fetchHead(ctx context.Context, repo *git.Repository) (plumbing.Hash, error) {
	err := repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   []config.RefSpec{m.refSpec()},
		Auth:       m.ep.auth,
		Tags:       git.NoTags,
		Force:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, m.fetchError(ctx, err)
	}
	ref, err := repo.Reference(m.remoteRef(), true)
	if err != nil {
		return plumbing.ZeroHash, m.fetchError(ctx, err)
	}
	return ref.Hash(), nil
}

// buildCommit applies edit to path as head holds it and stores a commit of
// the result, parented on head. Only the trees on the way to path are
// rewritten, each by swapping one entry's hash in its raw bytes, so every
// other entry (order, mode, name) stays byte for byte as it was.
func (m *Mirror) buildCommit(repo *git.Repository, head plumbing.Hash, path string, edit func([]byte) ([]byte, error), message string, sig object.Signature) (plumbing.Hash, error) {
	c, err := repo.CommitObject(head)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", head, err)
	}
	missing := func(why string) error {
		return errs.Errorf(errs.Invalid, "There is no file %s at commit %s of branch %s (%s); check the path.", path, head, m.branch, why)
	}

	names := strings.Split(path, "/")
	trees := make([][]byte, len(names)) // the raw trees from the root down to path's directory
	offsets := make([]int, len(names))  // where, in each, the hash of the next step starts
	var entry rawEntry
	h := c.TreeHash
	for i, name := range names {
		raw, err := readObject(repo, plumbing.TreeObject, h)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read tree %s of %s: %w", h, head, err)
		}
		var ok bool
		entry, ok, err = findEntry(raw, name)
		switch {
		case err != nil:
			return plumbing.ZeroHash, fmt.Errorf("read tree %s of %s: %w", h, head, err)
		case !ok && i == 0:
			return plumbing.ZeroHash, missing("the root has no " + name)
		case !ok:
			return plumbing.ZeroHash, missing(strings.Join(names[:i], "/") + " has no " + name)
		case i < len(names)-1 && entry.mode != filemode.Dir:
			return plumbing.ZeroHash, missing(strings.Join(names[:i+1], "/") + " is not a directory")
		}
		trees[i], offsets[i], h = raw, entry.hashAt, entry.hash
	}
	switch entry.mode {
	case filemode.Regular, filemode.Executable, filemode.Deprecated:
	case filemode.Dir:
		return plumbing.ZeroHash, missing("it is a directory")
	case filemode.Symlink:
		return plumbing.ZeroHash, missing("it is a symbolic link; edit the file it points to")
	default:
		return plumbing.ZeroHash, missing("it is a submodule")
	}

	old, err := readObject(repo, plumbing.BlobObject, entry.hash)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s at %s: %w", path, head, err)
	}
	updated, err := edit(bytes.Clone(old))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("edit %s: %w", path, err)
	}
	if bytes.Equal(old, updated) {
		return plumbing.ZeroHash, ErrNoChange
	}

	h, err = storeObject(repo, plumbing.BlobObject, updated)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	for i := len(trees) - 1; i >= 0; i-- {
		raw := bytes.Clone(trees[i])
		copy(raw[offsets[i]:offsets[i]+len(h)], h[:])
		if h, err = storeObject(repo, plumbing.TreeObject, raw); err != nil {
			return plumbing.ZeroHash, err
		}
	}

	sig.When = time.Now()
	commit := &object.Commit{
		Author:       sig,
		Committer:    sig,
		Message:      message,
		TreeHash:     h,
		ParentHashes: []plumbing.Hash{head},
	}
	obj := repo.Storer.NewEncodedObject()
	if err := commit.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode commit: %w", err)
	}
	h, err = repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store commit: %w", err)
	}
	return h, nil
}

// rawEntry is one entry of a raw tree object.
type rawEntry struct {
	mode   filemode.FileMode // as written, canonicalized
	hash   plumbing.Hash
	hashAt int // offset of hash in the raw tree
}

// findEntry looks name up in raw, a tree object's content: entries of
// "<octal mode> <name>\x00<20-byte hash>".
func findEntry(raw []byte, name string) (rawEntry, bool, error) {
	for i := 0; i < len(raw); {
		sp := bytes.IndexByte(raw[i:], ' ')
		if sp < 0 {
			return rawEntry{}, false, errors.New("malformed tree: an entry has no mode")
		}
		nul := bytes.IndexByte(raw[i+sp+1:], 0)
		if nul < 0 {
			return rawEntry{}, false, errors.New("malformed tree: an entry has no name")
		}
		at := i + sp + 1 + nul + 1
		if at+len(plumbing.ZeroHash) > len(raw) {
			return rawEntry{}, false, errors.New("malformed tree: an entry is cut short")
		}
		if string(raw[i+sp+1:at-1]) == name {
			mode, err := filemode.New(string(raw[i : i+sp]))
			if err != nil {
				return rawEntry{}, false, fmt.Errorf("malformed tree: mode of %q: %w", name, err)
			}
			e := rawEntry{mode: canonicalMode(mode), hashAt: at}
			copy(e.hash[:], raw[at:])
			return e, true, nil
		}
		i = at + len(plumbing.ZeroHash)
	}
	return rawEntry{}, false, nil
}

// canonicalMode maps a mode as old Git versions wrote it (100664, 040000…)
// to the one Git reads it as.
func canonicalMode(m filemode.FileMode) filemode.FileMode {
	switch m & 0o170000 {
	case 0o040000:
		return filemode.Dir
	case 0o100000:
		if m == filemode.Deprecated {
			return m
		}
		if m&0o111 != 0 {
			return filemode.Executable
		}
		return filemode.Regular
	case 0o120000:
		return filemode.Symlink
	}
	return filemode.Submodule
}

func readObject(repo *git.Repository, t plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	obj, err := repo.Storer.EncodedObject(t, h)
	if err != nil {
		return nil, err
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func storeObject(repo *git.Repository, t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	obj := repo.Storer.NewEncodedObject()
	obj.SetType(t)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store %s: %w", t, err)
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store %s: %w", t, err)
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store %s: %w", t, err)
	}
	h, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store %s: %w", t, err)
	}
	return h, nil
}

// push sends commit to refs/heads/<branch> as a fast-forward from parent.
// Two checks refuse it when the branch moved: go-git compares the advertised
// head with parent (RequireRemoteRefs), and the receiving end compares its
// head with the old value of the update command, which closes the window
// between advertisement and update. git-receive-pack does the second check;
// go-git's in-process server does not (it overwrites the ref), so a push
// through it holds Git's lock on the ref, which git honours, for the whole
// exchange. That server would also move a branch checked out in a working
// repository, which git-receive-pack refuses, so the push refuses it first.
func (m *Mirror) push(ctx context.Context, repo *git.Repository, parent, commit plumbing.Hash) error {
	ref := plumbing.NewBranchReferenceName(m.branch)
	if m.pushesInProcess() {
		ep, err := transport.NewEndpoint(m.ep.url)
		if err != nil {
			return fmt.Errorf("parse %s: %w", m.ep.url, err)
		}
		if err := m.refuseCheckedOut(ep.Path, ref); err != nil {
			return err
		}
		unlock, err := lockRef(ctx, ep.Path, ref, parent)
		if err != nil {
			return err
		}
		defer unlock()
	}
	err := repo.PushContext(ctx, &git.PushOptions{
		RemoteName:        git.DefaultRemoteName,
		RefSpecs:          []config.RefSpec{config.RefSpec(commit.String() + ":" + ref.String())},
		RequireRemoteRefs: []config.RefSpec{config.RefSpec(parent.String() + ":" + ref.String())},
		Auth:              m.ep.auth,
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		// go-git sends nothing, silently, for a source commit it cannot read.
		return fmt.Errorf("push %s: go-git sent no update", commit)
	}
	return err
}

// inProcessTransport is the type of go-git's in-process file transport, which
// useInProcessFileTransport may install.
var inProcessTransport = reflect.TypeOf(server.NewClient(server.DefaultLoader))

// pushesInProcess reports whether m's remote is served by go-git's
// in-process server rather than by git-receive-pack. go-git's protocol table
// is only written before a Mirror exists (see useInProcessFileTransport).
func (m *Mirror) pushesInProcess() bool {
	return strings.HasPrefix(m.ep.url, "file://") && reflect.TypeOf(client.Protocols["file"]) == inProcessTransport
}

// refuseCheckedOut refuses to move ref when gitDir is the .git of a working
// repository whose HEAD is ref, as git-receive-pack does by default: its
// working tree and index would be left holding the old commit.
func (m *Mirror) refuseCheckedOut(gitDir string, ref plumbing.ReferenceName) error {
	if filepath.Base(gitDir) != git.GitDirName {
		return nil
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return fmt.Errorf("read HEAD of %s: %w", gitDir, err)
	}
	if strings.TrimSpace(string(head)) != "ref: "+ref.String() {
		return nil
	}
	return errs.Errorf(errs.Invalid,
		"The remote %s is a working repository with branch %s checked out, which a push would leave behind; push to a bare repository (git clone --bare) or check out another branch there.",
		m.redactor.String(m.ep.url), m.branch)
}

// lockRef takes Git's lock on ref in the repository at gitDir, the way git
// does before it updates a ref: it creates <ref>.lock, failing when it exists,
// and waits up to remoteLockWait for a writer that holds it. The returned
// func removes it.
//
// The lock file holds current: go-git lists every file under refs/ as a ref,
// lock files included, and fails on an empty one, so the file is written
// aside and linked into place whole.
func lockRef(ctx context.Context, gitDir string, ref plumbing.ReferenceName, current plumbing.Hash) (func(), error) {
	lock := filepath.Join(gitDir, filepath.FromSlash(ref.String())+".lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", ref, err)
	}
	tmp, err := os.CreateTemp(gitDir, "sluice-ref-*.lock")
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", ref, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(current.String() + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", ref, err)
	}

	deadline := time.Now().Add(remoteLockWait)
	for {
		err := os.Link(tmp.Name(), lock)
		if err == nil {
			return func() { _ = os.Remove(lock) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock %s: %w", ref, err)
		}
		if time.Now().After(deadline) {
			return nil, errs.Errorf(errs.Unavailable,
				"Branch %s of the repository %s is locked by %s; if no Git process is using the repository, remove that file and try again.",
				strings.TrimPrefix(ref.String(), "refs/heads/"), gitDir, lock)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pushError words a failed push for the operator, as fetchError does for a
// fetch: credentials that may read but not write get their own message.
func (m *Mirror) pushError(ctx context.Context, err error) error {
	where := m.redactor.String(m.ep.url)
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return fmt.Errorf("push to %s: %w", where, ctxErr)
	}
	if errs.CodeOf(err) != "" {
		return err
	}
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod), strings.Contains(err.Error(), "unable to authenticate"):
		return errs.Errorf(errs.Unavailable,
			"The remote refused to let the configured credentials push to %s; give the token write access, or check the user and password in the URL.", where)
	}
	if worded := m.fetchError(ctx, err); errs.CodeOf(worded) != "" {
		return worded
	}
	return fmt.Errorf("push to %s: %w", where, err)
}
