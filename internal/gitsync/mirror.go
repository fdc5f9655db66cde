package gitsync

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

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

func (m *Mirror) scrub(err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return &errs.Error{Code: e.Code, Message: m.redactor.String(e.Message)}
	}
	return m.redactor.Error(err)
}

func (m *Mirror) refSpec() config.RefSpec {
	return config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/%s/%s", m.branch, git.DefaultRemoteName, m.branch))
}

func (m *Mirror) remoteRef() plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(git.DefaultRemoteName, m.branch)
}
