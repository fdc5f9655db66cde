package gitsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"

	"sluice/internal/errs"
	"sluice/internal/redact"
)

// Remote is where the intent repository lives.
type Remote struct {
	// URL is an https://, http://, ssh://, git:// or file:// URL, an scp-like
	// user@host:path, or a local path (made absolute). It may carry
	// credentials in its userinfo; they are used as auth and never stored.
	URL string
	// Branch is the branch to follow, as a short name. Default "main".
	Branch string
	// Token is an optional HTTPS token, sent as the basic-auth password with
	// the URL's user, or "x-access-token" when the URL names none. It wins
	// over a password in the URL.
	Token string
}

// Opts configures a Mirror.
type Opts struct {
	// Dir is the working tree (the config root). It is created and cloned
	// into when absent or empty; a non-empty directory that is not a checkout
	// of Remote is refused, never overwritten.
	Dir string
	// Remote is the repository and branch to mirror.
	Remote Remote
	// Redactor scrubs every error text. Default redact.Default. Every secret
	// in Remote is added to it.
	Redactor *redact.Redactor
	// Logger receives debug lines about each sync. Default: discard.
	Logger *slog.Logger
	// AdoptRemote lets a checkout of another repository be re-pointed at
	// Remote, the way a branch change is followed: its tracked files give way
	// to Remote's, untracked files stay. The caller sets it when the operator
	// changed the repository. Default false: such a checkout is refused.
	AdoptRemote bool
	// VerifyEvery is how often a sync compares every tracked file of the
	// working tree with the commit and restores what was edited or removed
	// by hand; between two verifications a sync reads only what changed.
	// Sluice reads units and Terraform modules from Git's objects, never
	// from the working tree, so an edit there changes nothing it does until
	// it is restored. Default DefaultVerifyEvery; negative: every sync. A
	// full sync (Since "") always verifies.
	VerifyEvery time.Duration
}

// DefaultVerifyEvery is Opts.VerifyEvery's default.
const DefaultVerifyEvery = 10 * time.Minute

// Mirror keeps one working tree equal to one branch of one remote.
type Mirror struct {
	dir      string
	ep       *endpoint
	branch   string
	redactor *redact.Redactor
	logger   *slog.Logger
	adopt    bool
	// verifyEvery is Opts.VerifyEvery with its default applied.
	verifyEvery time.Duration

	mu sync.Mutex // serializes Syncs of this Mirror; the flock serializes processes
}

// New returns a Mirror for opts. It checks the options and registers the
// remote's secrets with the redactor, but touches neither disk nor network.
// Its errors are *errs.Error with Code errs.Invalid.
func New(opts Opts) (*Mirror, error) {
	r := opts.Redactor
	if r == nil {
		r = redact.Default
	}
	ep, err := parseRemote(opts.Remote)
	if ep != nil {
		r.Add(ep.secrets...)
	}
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errs.Errorf(errs.Invalid, "The working tree directory is empty; set the config root.")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "The working tree directory %q cannot be made absolute.", opts.Dir)
	}
	branch := strings.TrimPrefix(cmp.Or(opts.Remote.Branch, "main"), "refs/heads/")
	if err := plumbing.NewBranchReferenceName(branch).Validate(); err != nil || strings.HasPrefix(branch, "-") {
		return nil, errs.Errorf(errs.Invalid, "Branch %q is not a valid Git branch name.", branch)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if strings.HasPrefix(ep.url, "file://") {
		useInProcessFileTransport()
	}
	return &Mirror{
		dir:      dir,
		ep:       ep,
		branch:   branch,
		redactor: r,
		logger:   logger.With("component", "gitsync"),
		adopt:    opts.AdoptRemote,

		verifyEvery: cmp.Or(opts.VerifyEvery, DefaultVerifyEvery),
	}, nil
}

// Result describes one Sync.
type Result struct {
	Commit  string    // the commit the working tree now holds (40 hex)
	Message string    // its full commit message, trimmed
	Author  string    // "Name <email>"
	When    time.Time // the author's time
	// Since is the commit Changed is relative to; "" when Full.
	Since string
	// Unmoved is true when the sync found the branch at Since, here and on
	// the remote (by listing the remote's refs, as git ls-remote does):
	// nothing was fetched or written. Message is then SyncOpts.Message, and
	// Author and When are empty, when that was given; otherwise the commit
	// was read for all three.
	Unmoved bool
	// Full is true when Changed could not be computed: since was "" (a first
	// or a forced full sync) or is not a commit the local repository holds
	// (unknown, or gone with a re-clone). The caller then reads the whole
	// tree. A fresh clone still computes Changed when since is in its
	// history.
	Full bool
	// Changed lists, when !Full, every path whose content or mode differs
	// between Since and Commit, sorted. Empty when they are equal.
	Changed []Change
	// Tracked holds, when Full, every file path of Commit's tree, so that a
	// caller walking the working tree can tell Git's files from untracked
	// ones. Nil when !Full.
	Tracked map[string]bool
	// Files holds, sorted by path, the files of Commit that SyncOpts.Read
	// picked, read from the object store: a caller parses them without
	// reading the working tree back. A path Commit lacks is not in it.
	Files []File
}

// File is one file of the synced commit, as its blob holds it.
type File struct {
	Path string      // repo-relative, forward slashes
	Mode fs.FileMode // a permission for a regular file; fs.ModeSymlink; fs.ModeDir for a submodule
	Size int64
	// Data is the content of a regular file of at most SyncOpts.MaxSize
	// bytes; nil otherwise.
	Data []byte
}

// SyncOpts are the options of SyncFiles.
type SyncOpts struct {
	// Since is Sync's since: the commit the caller last synced.
	Since string
	// Read, when set, picks the files whose content Result.Files carries:
	// it is asked about every changed path (every tracked one when Full)
	// and every path of Also. Nil: none.
	Read func(path string) bool
	// Also lists paths to read besides the changed ones, such as files the
	// caller wants to look at again although unchanged.
	Also []string
	// MaxSize bounds the content read per file; a larger one comes without
	// Data. 0: no bound.
	MaxSize int64
	// Message is Since's commit message when the caller has it (from the
	// receipt of the sync that reached Since). A sync that finds the branch
	// unmoved returns it as Result.Message instead of reading the commit;
	// "": the commit is read.
	Message string
}

// Change is one path that differs between two commits.
type Change struct {
	Path    string // repo-relative, forward slashes
	Deleted bool   // gone in Commit
}

// Sync makes the working tree match origin/<branch>. It clones when Dir is
// absent or empty; otherwise it fetches with a force refspec, so that a
// force-pushed branch is followed, and checks out the tracked paths that
// differ. Untracked paths are left alone, and a file deleted by the new
// commit is removed. A local edit of a tracked file is overwritten when the
// working tree is next verified (see Opts.VerifyEvery), or at once when the
// new commit changes that file. A sync that finds the branch where it was,
// between verifications, compares refs and reads no file and no index.
//
// since is the commit the caller last synced: Changed is the diff between it
// and the new commit, computed by comparing the two trees, so its cost
// follows the change and not the repository's size. Pass "" to get Full.
//
// A damaged object store (a garbled loose object or pack, an object gone) is
// fetched again into a new one, and the sync goes on from it; a repair that
// fails is an *errs.Error with Code errs.Unavailable that says what is
// damaged, and the next Sync tries again.
//
// A Sync holds a lock on Dir/.git/sluice.lock, so two processes never
// interleave. Transport failures are *errs.Error with Code errs.Unavailable
// and a message for the operator; every error is redacted.
func (m *Mirror) Sync(ctx context.Context, since string) (*Result, error) {
	return m.SyncFiles(ctx, SyncOpts{Since: since})
}

// SyncFiles is Sync that also returns the content of the files opts.Read
// picks, from the object store: the blobs a checkout writes are kept rather
// than read back, and the others are read without touching the working tree.
func (m *Mirror) SyncFiles(ctx context.Context, opts SyncOpts) (*Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.sync(ctx, opts)
	if err != nil {
		return nil, m.scrub(err)
	}
	return res, nil
}

func (m *Mirror) scrub(err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return &errs.Error{Code: e.Code, Message: m.redactor.String(e.Message)}
	}
	return m.redactor.Error(err)
}

func (m *Mirror) sync(ctx context.Context, opts SyncOpts) (*Result, error) {
	var res *Result
	err := m.withRepair(ctx, func(repo *git.Repository) error {
		var err error
		res, err = m.pull(ctx, repo, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// pull fetches the branch into repo and checks it out.
func (m *Mirror) pull(ctx context.Context, repo *git.Repository, opts SyncOpts) (*Result, error) {
	since := opts.Since
	begin := time.Now()
	if err := m.configure(repo); err != nil {
		return nil, err
	}
	// The working tree is verified (every tracked file compared with the
	// index, local edits restored) on a full sync, after a checkout left
	// half way, and when the last verification is older than VerifyEvery.
	// Otherwise a sync reads no file: one that finds the branch where it was
	// compares refs and stops, and one that moves writes only the diff.
	gitDir := filepath.Join(m.dir, git.GitDirName)
	verify := since == "" || verifyDue(gitDir, m.verifyEvery)
	if !verify {
		_, verify, _ = readPending(gitDir) // an unreadable marker is read again by checkout
	}
	if !verify && len(opts.Also) == 0 && plumbing.IsHash(since) {
		res, err := m.unmoved(ctx, repo, plumbing.NewHash(since), opts.Message)
		if err != nil || res != nil {
			if res != nil {
				m.logger.DebugContext(ctx, "synced: unmoved", "commit", res.Commit, "total_ms", time.Since(begin).Milliseconds())
			}
			return res, err
		}
	}
	var sc *scan
	if verify {
		sc = m.startScan(repo, true)
		defer sc.wait() // its goroutines read the working tree under the sync lock
	}
	err := repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   []config.RefSpec{m.refSpec()},
		Auth:       m.ep.auth,
		Tags:       git.NoTags,
		Force:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, m.fetchError(ctx, err)
	}
	fetched := time.Now()
	ref, err := repo.Reference(m.remoteRef(), true)
	if err != nil {
		return nil, m.fetchError(ctx, err)
	}
	commit, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, fmt.Errorf("read fetched commit %s: %w", ref.Hash(), err)
	}

	co, err := m.checkout(ctx, repo, commit, opts.Read, sc, verify)
	if err != nil {
		return nil, err
	}
	checkedOut := time.Now()

	res := &Result{
		Commit:  commit.Hash.String(),
		Message: strings.TrimSpace(commit.Message),
		Author:  fmt.Sprintf("%s <%s>", commit.Author.Name, commit.Author.Email),
		When:    commit.Author.When,
		Full:    true,
	}
	if err := m.changedSince(ctx, repo, since, commit, co, res); err != nil {
		return nil, err
	}
	if res.Full {
		tree, err := commit.Tree()
		if err != nil {
			return nil, fmt.Errorf("read tree of %s: %w", commit.Hash, err)
		}
		res.Tracked = map[string]bool{}
		var picked []fileAt
		if err := walkFiles(tree, func(name string, e *object.TreeEntry) {
			res.Tracked[name] = true
			if opts.Read != nil && opts.Read(name) {
				picked = append(picked, fileAt{name, e})
			}
		}); err != nil {
			return nil, err
		}
		if res.Files, err = m.readFiles(ctx, repo, picked, co.kept, opts); err != nil {
			return nil, err
		}
	} else if opts.Read != nil {
		tree, err := commit.Tree()
		if err != nil {
			return nil, fmt.Errorf("read tree of %s: %w", commit.Hash, err)
		}
		var picked []fileAt
		seen := make(map[string]bool)
		for _, ch := range res.Changed {
			seen[ch.Path] = true
			if !ch.Deleted && opts.Read(ch.Path) {
				picked = append(picked, fileAt{path: ch.Path})
			}
		}
		for _, p := range opts.Also {
			if !seen[p] && opts.Read(p) && checkPath(p) == nil {
				seen[p] = true
				picked = append(picked, fileAt{path: p})
			}
		}
		for i := range picked {
			if picked[i].entry, err = findFile(tree, picked[i].path); err != nil {
				return nil, err
			}
		}
		if res.Files, err = m.readFiles(ctx, repo, picked, co.kept, opts); err != nil {
			return nil, err
		}
	}
	m.logger.DebugContext(ctx, "synced",
		"commit", res.Commit, "from", co.from.String(), "full", res.Full, "changed", len(res.Changed),
		"written", co.written, "removed", co.removed, "restored", co.restored, "reconciled", co.reconciled, "verified", co.verified,
		"fetch_ms", fetched.Sub(begin).Milliseconds(), "checkout_ms", checkedOut.Sub(fetched).Milliseconds(),
		"total_ms", time.Since(begin).Milliseconds())
	return res, nil
}

// unmoved returns the Result of a sync with nothing to do, found without a
// fetch or a read of the object store: the working tree's HEAD, its branch
// and origin/<branch> are all at since (no checkout is pending: the caller
// checked), and the remote lists its branch at since too. Nil when any of
// that does not hold; the error is the remote's, worded as a fetch's.
// When message is "", the commit is read for its message.
func (m *Mirror) unmoved(ctx context.Context, repo *git.Repository, since plumbing.Hash, message string) (*Result, error) {
	branch := plumbing.NewBranchReferenceName(m.branch)
	head, err := repo.Storer.Reference(plumbing.HEAD)
	if err != nil || head.Type() != plumbing.SymbolicReference || head.Target() != branch {
		return nil, nil
	}
	for _, name := range []plumbing.ReferenceName{branch, m.remoteRef()} {
		if ref, err := repo.Storer.Reference(name); err != nil || ref.Hash() != since {
			return nil, nil
		}
	}
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{m.ep.url}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: m.ep.auth})
	if err != nil {
		return nil, m.fetchError(ctx, err)
	}
	if !slices.ContainsFunc(refs, func(r *plumbing.Reference) bool { return r.Name() == branch && r.Hash() == since }) {
		return nil, nil // moved, or gone: the fetch says which
	}
	res := &Result{Commit: since.String(), Since: since.String(), Changed: []Change{}, Unmoved: true, Message: message}
	if message == "" {
		c, err := repo.CommitObject(since)
		if err != nil {
			// The refs name a commit the store cannot give: damage, which
			// the error makes withRepair mend.
			return nil, fmt.Errorf("read commit %s: %w", since, err)
		}
		res.Message = strings.TrimSpace(c.Message)
		res.Author, res.When = fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email), c.Author.When
	}
	return res, nil
}

func (m *Mirror) refSpec() config.RefSpec {
	return config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/%s/%s", m.branch, git.DefaultRemoteName, m.branch))
}

func (m *Mirror) remoteRef() plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(git.DefaultRemoteName, m.branch)
}

// changedSince fills res.Since and res.Changed when since names a commit the
// repository holds.
func (m *Mirror) changedSince(ctx context.Context, repo *git.Repository, since string, to *object.Commit, co *checkoutResult, res *Result) error {
	if since == "" || !plumbing.IsHash(since) {
		return nil
	}
	from := plumbing.NewHash(since)
	var changes []treeChange
	switch {
	case from == to.Hash:
	case from == co.from && co.changes != nil:
		changes = co.changes
	default:
		c, err := repo.CommitObject(from)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			// Gone from the remote's history (a force push), or in a
			// pack go-git cannot read: only the latter is mended, by the
			// repair the error starts, before a full sync is chosen.
			if m.checkStore(ctx, to.Hash) != nil {
				return fmt.Errorf("read commit %s: %w", since, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read commit %s: %w", since, err)
		}
		fromTree, err := c.Tree()
		if err != nil {
			return fmt.Errorf("read tree of %s: %w", since, err)
		}
		toTree, err := to.Tree()
		if err != nil {
			return fmt.Errorf("read tree of %s: %w", to.Hash, err)
		}
		changes, err = diffTrees(ctx, repo, fromTree, toTree)
		if err != nil {
			return fmt.Errorf("diff %s..%s: %w", since, to.Hash, err)
		}
	}
	res.Full, res.Since = false, from.String()
	res.Changed = make([]Change, len(changes))
	for i, ch := range changes {
		res.Changed[i] = Change{Path: ch.path, Deleted: ch.to == nil}
	}
	return nil
}

// open opens Dir's repository under the sync lock, creating it when Dir is
// absent or empty. The returned func releases the lock.
func (m *Mirror) open(ctx context.Context) (*git.Repository, func(), error) {
	repo, closeRepo, unlock, err := m.openParts(ctx)
	if err != nil {
		return nil, nil, err
	}
	return repo, func() { closeRepo(); unlock() }, nil
}

// openParts is open with the two releases apart: closeRepo closes the
// repository's files, unlock then releases the lock. A repair closes the
// repository, replaces its object store and opens it again under the lock.
func (m *Mirror) openParts(ctx context.Context) (*git.Repository, func(), func(), error) {
	fi, err := os.Stat(m.dir) // the config root may be a link to a directory
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return nil, nil, nil, fmt.Errorf("create working tree: %w", err)
		}
	case err != nil:
		return nil, nil, nil, fmt.Errorf("stat working tree: %w", err)
	case !fi.IsDir():
		return nil, nil, nil, errs.Errorf(errs.Invalid, "The working tree %s is not a directory; point the config root at a directory.", m.dir)
	}

	gitDir := filepath.Join(m.dir, git.GitDirName)
	fi, err = os.Lstat(gitDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Empty, or holding only the .git another process has just made.
		empty, err := onlyEntries(m.dir, git.GitDirName)
		if err != nil {
			return nil, nil, nil, err
		}
		if !empty {
			return nil, nil, nil, m.notOurs("is not empty and is not a Git checkout")
		}
		if err := os.Mkdir(gitDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, nil, nil, fmt.Errorf("create %s: %w", gitDir, err)
		}
	case err != nil:
		return nil, nil, nil, fmt.Errorf("stat %s: %w", gitDir, err)
	case !fi.IsDir():
		return nil, nil, nil, m.notOurs("has a .git that is not a directory (a linked worktree or submodule)")
	}

	unlock, err := lockFile(ctx, filepath.Join(gitDir, lockName))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("lock working tree: %w", err)
	}
	repo, closeRepo, err := m.openLocked()
	if err != nil {
		unlock()
		return nil, nil, nil, err
	}
	return repo, closeRepo, unlock, nil
}

const (
	lockName    = "sluice.lock"    // in .git: held during a sync
	pendingName = "sluice-pending" // in .git: names the commit a sync was checking out
	initName    = "sluice-init"    // in .git: a sync is creating the repository
)

func (m *Mirror) openLocked() (*git.Repository, func(), error) {
	gitDir := filepath.Join(m.dir, git.GitDirName)
	_, err := os.Lstat(filepath.Join(gitDir, initName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if m.mirrorsRemote(gitDir) {
			if err := m.mend(gitDir); err != nil {
				return nil, nil, err
			}
		}
		repo, closeRepo, err := openRepo(m.dir)
		if err == nil {
			return repo, closeRepo, nil
		}
		if !errors.Is(err, git.ErrRepositoryNotExists) {
			return nil, nil, fmt.Errorf("open repository: %w", err)
		}
		// Dir holds only a .git with at most our lock file (an init that
		// did not get further): start the repository.
		onlyGit, err := onlyEntries(m.dir, git.GitDirName)
		if err != nil {
			return nil, nil, err
		}
		onlyLock, err := onlyEntries(gitDir, lockName)
		if err != nil {
			return nil, nil, err
		}
		if !onlyGit || !onlyLock {
			return nil, nil, m.notOurs("has a .git directory that is not a repository")
		}
		if err := os.WriteFile(filepath.Join(gitDir, initName), nil, 0o644); err != nil {
			return nil, nil, fmt.Errorf("create %s: %w", initName, err)
		}
	case err != nil:
		return nil, nil, fmt.Errorf("stat %s: %w", initName, err)
	default:
		// An init stopped half way (the process was killed): it creates
		// directories before HEAD and the config, so what it left is not
		// yet a repository, and would be refused as someone else's. All
		// of .git but the lock is that init's: start it again.
		if err := removeAllBut(gitDir, lockName, initName); err != nil {
			return nil, nil, err
		}
		m.logger.Warn("restarting an interrupted init of the working tree", "dir", m.dir)
	}
	_, err = git.PlainInitWithOptions(m.dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(m.branch)},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("init repository: %w", err)
	}
	if err := os.Remove(filepath.Join(gitDir, initName)); err != nil {
		return nil, nil, fmt.Errorf("remove %s: %w", initName, err)
	}
	repo, closeRepo, err := openRepo(m.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open repository: %w", err)
	}
	return repo, closeRepo, nil
}

// mirrorsRemote reports whether the repository in gitDir is one this
// Mirror may mend: its origin is Remote, or AdoptRemote lets it take the
// repository over. It reads the config file itself, since what mend repairs
// can keep go-git from opening the repository.
func (m *Mirror) mirrorsRemote(gitDir string) bool {
	if m.adopt {
		return true
	}
	f, err := os.Open(filepath.Join(gitDir, "config"))
	if err != nil {
		return false
	}
	defer f.Close()
	cfg, err := config.ReadConfig(f)
	if err != nil {
		return false
	}
	origin := cfg.Remotes[git.DefaultRemoteName]
	return origin != nil && len(origin.URLs) > 0 && sameRemote(origin.URLs[0], m.ep)
}

// mend undoes what a sync killed half way through go-git's writes leaves
// behind, each of which would fail every later sync:
//
//   - an empty ref: go-git writes a ref by truncating its file, then
//     writing it, and every later read fails on an empty one (a fetch reads
//     them all). An empty ref names nothing, so removing it loses nothing:
//     a fetch writes the remote ref again, and a checkout that finds no
//     branch reconciles every path.
//   - an empty HEAD (a branch switch stopped half way): it gets the branch
//     back, and a pending marker, so that the checkout reconciles every path
//     rather than trust a diff from whatever that branch held.
//   - a pack index without its pack: go-git writes the index, then moves
//     the pack into place, and keeps an index it finds for a pack it
//     fetches again, cut short or not, so that the pack's objects could
//     never be read. (Git moves the pack first, so a git process working in
//     the tree never has such an index.)
//
// It also finishes or undoes a repair of the object store a kill stopped
// (see mendRefetch). It runs under the sync lock, and only on a repository
// of the remote.
func (m *Mirror) mend(gitDir string) error {
	if err := m.mendRefetch(gitDir); err != nil {
		return err
	}
	head := filepath.Join(gitDir, "HEAD")
	if fi, err := os.Lstat(head); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		m.logger.Warn("HEAD is empty; pointing it at the branch again", "dir", m.dir, "branch", m.branch)
		if _, err := os.Lstat(filepath.Join(gitDir, pendingName)); errors.Is(err, fs.ErrNotExist) {
			if err := os.WriteFile(filepath.Join(gitDir, pendingName), nil, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", pendingName, err)
			}
		}
		tmp := filepath.Join(gitDir, "sluice-HEAD.tmp")
		if err := os.WriteFile(tmp, []byte("ref: "+plumbing.NewBranchReferenceName(m.branch).String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("write HEAD: %w", err)
		}
		if err := os.Rename(tmp, head); err != nil {
			return fmt.Errorf("write HEAD: %w", err)
		}
	}
	err := filepath.WalkDir(filepath.Join(gitDir, "refs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil || fi.Size() > 0 {
			return err
		}
		m.logger.Warn("removing an empty ref", "dir", m.dir, "ref", path)
		return os.Remove(path)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mend refs: %w", err)
	}

	packDir := filepath.Join(gitDir, "objects", "pack")
	entries, err := os.ReadDir(packDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", packDir, err)
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "pack-") || !strings.HasSuffix(name, ".idx") || names[strings.TrimSuffix(name, ".idx")+".pack"] {
			continue
		}
		m.logger.Warn("removing a pack index without its pack", "dir", m.dir, "file", name)
		if err := os.Remove(filepath.Join(packDir, name)); err != nil {
			return fmt.Errorf("mend packs: %w", err)
		}
	}
	return nil
}

// openRepo opens the repository of working tree dir, keeping pack files
// open for the whole sync: go-git otherwise reopens a pack, through a
// symlink-resolving path walk, for every object it reads.
func openRepo(dir string) (*git.Repository, func(), error) {
	st := filesystem.NewStorageWithOptions(osfs.New(filepath.Join(dir, git.GitDirName)),
		cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	repo, err := git.Open(st, osfs.New(dir))
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return repo, func() { _ = st.Close() }, nil
}

func (m *Mirror) notOurs(what string) error {
	return errs.Errorf(errs.Invalid,
		"The working tree %s %s of %s; sluice will not overwrite it. Move its files away or point the config root at an empty directory.",
		m.dir, what, m.redactor.String(m.ep.url))
}

// configure points the origin remote at the mirrored URL and branch. An
// existing checkout must already name the same repository: it may differ in
// credentials (which are dropped from the config) and in branch (which is
// switched), never in URL. A repository without commits and without an
// origin is one whose first sync stopped early, and is adopted.
func (m *Mirror) configure(repo *git.Repository) error {
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("read repository config: %w", err)
	}
	origin := cfg.Remotes[git.DefaultRemoteName]
	switch {
	case origin == nil:
		if _, err := repo.Head(); !errors.Is(err, plumbing.ErrReferenceNotFound) {
			return m.notOurs("is a Git checkout without an origin remote")
		}
	case m.adopt:
		// The operator moved to another repository: write the new origin below.
	case len(origin.URLs) == 0 || !sameRemote(origin.URLs[0], m.ep):
		other := "(none)"
		if len(origin.URLs) > 0 {
			other = stripUserinfo(origin.URLs[0])
			if ep, err := parseRemote(Remote{URL: origin.URLs[0]}); err == nil {
				other = ep.url
			}
		}
		return errs.Errorf(errs.Invalid,
			"The working tree %s is a checkout of %s, not of %s; sluice will not overwrite it. Move it away or point the config root at an empty directory.",
			m.dir, m.redactor.String(other), m.redactor.String(m.ep.url))
	}
	want := &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{m.ep.url}, Fetch: []config.RefSpec{m.refSpec()}}
	branch := &config.Branch{Name: m.branch, Remote: git.DefaultRemoteName, Merge: plumbing.NewBranchReferenceName(m.branch)}
	have := cfg.Branches[m.branch]
	if origin != nil && slices.Equal(origin.URLs, want.URLs) && slices.Equal(origin.Fetch, want.Fetch) &&
		have != nil && have.Remote == branch.Remote && have.Merge == branch.Merge {
		return nil
	}
	cfg.Remotes[git.DefaultRemoteName] = want
	cfg.Branches[m.branch] = branch
	if err := repo.SetConfig(cfg); err != nil {
		return fmt.Errorf("write repository config: %w", err)
	}
	return nil
}

// stripUserinfo drops the userinfo of a URL found in a config, for an error
// message. The redactor would mask it too; this keeps the message readable.
func stripUserinfo(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 && !strings.Contains(rest[:at], "/") {
		rest = rest[at+1:]
	}
	return scheme + "://" + rest
}

// removeAllBut removes every entry of dir except the kept ones.
func removeAllBut(dir string, keep ...string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if slices.Contains(keep, e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("remove %s: %w", filepath.Join(dir, e.Name()), err)
		}
	}
	return nil
}

// onlyEntries reports whether dir holds no entries except allowed ones.
func onlyEntries(dir string, allowed ...string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", dir, err)
	}
	defer f.Close()
	for {
		names, err := f.Readdirnames(16)
		for _, n := range names {
			if !slices.Contains(allowed, n) {
				return false, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", dir, err)
		}
	}
}
