package gitsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"sluice/internal/errs"
)

// tokenUser is the basic-auth user that goes with Remote.Token when the URL
// names none. GitHub, GitLab and Gitea accept any user with a token.
const tokenUser = "x-access-token"

var installFileTransport sync.Once

// useInProcessFileTransport makes file:// fetches run go-git's own
// upload-pack in this process when the git-upload-pack binary is missing, so
// a machine without git can still sync from a local repository. Where the
// binary exists, go-git's default file transport runs it: it is faster (it
// does not walk the whole history on every fetch), and unlike go-git's
// server it ignores "have" lines naming commits it lacks, which a checkout
// that changed repositories sends. go-git's protocol table is global and
// unguarded: it is written once, before any Mirror fetches.
func useInProcessFileTransport() {
	installFileTransport.Do(func() {
		if _, err := exec.LookPath("git-upload-pack"); err == nil {
			return
		}
		client.InstallProtocol("file", server.NewClient(server.DefaultLoader))
	})
}

// endpoint is a Remote taken apart: the URL without credentials, which is
// what .git/config holds and errors show, and the credentials as go-git auth.
type endpoint struct {
	url     string
	auth    transport.AuthMethod
	secrets []string
}

// parseRemote checks r's URL and moves its credentials into auth.
func parseRemote(r Remote) (*endpoint, error) {
	raw := strings.TrimSpace(r.URL)
	if raw == "" {
		return nil, errs.Errorf(errs.Invalid, "The remote URL is empty; set it to an https://, ssh:// or file:// URL or a local path.")
	}
	ep := &endpoint{}
	if r.Token != "" {
		ep.secrets = append(ep.secrets, r.Token)
	}

	if !strings.Contains(raw, "://") {
		parsed, err := transport.NewEndpoint(raw)
		if err != nil {
			return nil, errs.Errorf(errs.Invalid, "The remote URL cannot be parsed; write it as https://host/repo.git, ssh://host/repo.git or a local path.")
		}
		if parsed.Protocol == "ssh" { // scp-like user@host:path, which cannot carry a password
			if r.Token != "" {
				return nil, errs.Errorf(errs.Invalid, "A token works only with an https:// remote; an SSH remote authenticates with the SSH agent's keys.")
			}
			ep.url = raw
			return ep, nil
		}
		ep.url = "file://" + filepath.ToSlash(gitDirOf(parsed.Path))
		return ep, nil
	}

	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes its input, credentials included: say less.
		return nil, errs.Errorf(errs.Invalid, "The remote URL cannot be parsed; write it as https://host/repo.git, ssh://host/repo.git or a local path.")
	}
	var user, pass string
	var hasPass bool
	if u.User != nil {
		user = u.User.Username()
		pass, hasPass = u.User.Password()
		if hasPass {
			ep.secrets = append(ep.secrets, u.User.String(), pass)
			if encoded, ok := strings.CutPrefix(u.User.String(), url.User(user).String()+":"); ok {
				ep.secrets = append(ep.secrets, encoded)
			}
		} else if u.Scheme == "https" || u.Scheme == "http" {
			// https://TOKEN@host is how some forges take a token. An SSH
			// login name is no secret, file:// and git:// send no
			// credentials, and masking a user name would garble text.
			ep.secrets = append(ep.secrets, user, u.User.String())
		}
	}

	switch u.Scheme {
	case "http", "https":
		switch {
		case r.Token != "":
			ep.auth = &githttp.BasicAuth{Username: cmp.Or(user, tokenUser), Password: r.Token}
		case u.User != nil:
			ep.auth = &githttp.BasicAuth{Username: user, Password: pass}
		}
		u.User = nil
	case "ssh":
		if r.Token != "" {
			return nil, errs.Errorf(errs.Invalid, "A token works only with an https:// remote; an SSH remote authenticates with the SSH agent's keys.")
		}
		if hasPass {
			ep.auth = &gitssh.Password{User: user, Password: pass}
		}
		if u.User != nil {
			u.User = url.User(user) // the login name stays: ssh needs it and it is no secret
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, errs.Errorf(errs.Invalid, "A file:// remote must name a local path (file:///path/to/repo.git), not a host.")
		}
		u.User, u.Host = nil, ""
		u.Path = filepath.ToSlash(gitDirOf(u.Path))
	case "git":
		u.User = nil
	default:
		return nil, errs.Errorf(errs.Invalid, "The remote URL's scheme %q is not supported; use https://, ssh://, file:// or a local path.", u.Scheme)
	}
	ep.url = strings.TrimSuffix(u.String(), "/")
	return ep, nil
}

// sameRemote reports whether a remote URL found in .git/config names the
// repository of ep, once both are normalized and stripped of credentials.
func sameRemote(configured string, ep *endpoint) bool {
	other, err := parseRemote(Remote{URL: configured})
	return err == nil && other.url == ep.url
}

// fetchError words a failed fetch for the operator. go-git's transport errors
// quote server responses and, for some transports, the endpoint with its
// credentials, so none of their text is reused except a network cause, which
// is redacted by the caller.
func (m *Mirror) fetchError(ctx context.Context, err error) error {
	where := m.redactor.String(m.ep.url)
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return fmt.Errorf("fetch %s: %w", where, ctxErr)
	}
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod), strings.Contains(err.Error(), "unable to authenticate"):
		return errs.Errorf(errs.Unavailable, "The remote refused the credentials for %s; check the token, or the user and password in the URL.", where)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return errs.Errorf(errs.Unavailable, "There is no repository at %s; check the remote URL.", where)
	case errors.Is(err, git.NoMatchingRefSpecError{}), errors.Is(err, transport.ErrEmptyRemoteRepository),
		errors.Is(err, plumbing.ErrReferenceNotFound):
		return errs.Errorf(errs.Unavailable, "Branch %s does not exist at %s; push it or configure another branch.", m.branch, where)
	}
	var httpErr *githttp.Err
	if asUnwrapped(err, &httpErr) {
		return errs.Errorf(errs.Unavailable, "The remote at %s answered HTTP %d; try again later.", where, httpErr.StatusCode())
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case asUnwrapped(err, &opErr):
		return errs.Errorf(errs.Unavailable, "Cannot reach %s: %s.", where, m.redactor.String(opErr.Error()))
	case asUnwrapped(err, &dnsErr):
		return errs.Errorf(errs.Unavailable, "Cannot reach %s: %s.", where, m.redactor.String(dnsErr.Error()))
	case asUnwrapped(err, &urlErr):
		return errs.Errorf(errs.Unavailable, "Cannot reach %s: %s.", where, m.redactor.String(urlErr.Err.Error()))
	case asUnwrapped(err, &netErr):
		return errs.Errorf(errs.Unavailable, "Cannot reach %s: %s.", where, m.redactor.String(netErr.Error()))
	}
	return fmt.Errorf("fetch %s: %w", where, err)
}

// asUnwrapped is errors.As that also looks inside go-git's
// plumbing.UnexpectedError and PermanentError, which do not implement Unwrap.
func asUnwrapped[T any](err error, target *T) bool {
	for err != nil {
		if errors.As(err, target) {
			return true
		}
		var unexpected *plumbing.UnexpectedError
		var permanent *plumbing.PermanentError
		switch {
		case errors.As(err, &unexpected):
			err = unexpected.Err
		case errors.As(err, &permanent):
			err = permanent.Err
		default:
			return false
		}
	}
	return false
}

// gitDirOf points a local remote at its object store: go-git's in-process
// file transport reads a repository as a bare one, so a working repository
// (a directory holding .git) is served from its .git directory.
func gitDirOf(p string) string {
	if fi, err := os.Stat(filepath.Join(p, ".git")); err == nil && fi.IsDir() {
		return filepath.Join(p, ".git")
	}
	return p
}
