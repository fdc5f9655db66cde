package source

import (
	"cmp"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/redact"
	"sluice/internal/unit"
)

// FuzzSettingsInput checks normalizeInput, the part of PutSettings and of
// the sources' create and change that needs no database. A refusal is
// errs.Invalid. Accepted settings have a Git branch name without control
// characters or ".."; a clean relative path without a ".." element, a NUL
// or bytes that are not UTF-8 (and no input path with a ".." element is
// accepted); the interval as given; and a URL with no credentials left in
// it, which for a "://" URL also means no control character (url.Parse
// refuses them). Accepted settings round-trip: normalizing them again
// changes nothing, the credentials put back into the URL split off again
// unchanged, and the masked URL the API shows, sent back, stands for the
// same repository.
//
// A path may hold other control characters by design: Git allows them in
// file names, and a prefix names any directory a unit can be in.
//
// A URL without "://" is git@host:repo or an absolute, clean local path,
// with no control character and valid UTF-8; Git's transport::address form
// (ext::, fd::) and a relative path are refused.
//
// Not checked, because it does not hold today: a "://" URL keeps bytes
// that are not UTF-8 in its query ("http://host/x?\xae"); and a branch may
// hold such bytes too.
func FuzzSettingsInput(f *testing.F) {
	for _, seed := range []SettingsInput{
		{RepoURL: "https://example.com/org/intent.git", Branch: "main", Path: "apps", SyncIntervalSec: 600},
		{RepoURL: "https://user:p%40ss@example.com/intent.git", Branch: "release/v1"},
		{RepoURL: "https://TOKEN@example.com/intent.git", Path: "./apps/"},
		{RepoURL: "https://deployer@example.com/intent.git", Token: "secret"},
		{RepoURL: "https://user:pw@example.com/intent.git", Token: "secret"},
		{RepoURL: "https://***@example.com/intent.git", Branch: "main"},
		{RepoURL: "https://example.com/a***@b", Branch: "main"},
		{RepoURL: "ssh://git@example.com:2222/intent.git", Branch: "main"},
		{RepoURL: "ssh://git:pw@example.com/intent.git"},
		{RepoURL: "git@example.com:org/intent.git"},
		{RepoURL: "file:///srv/git/intent.git"},
		{RepoURL: "file://user@localhost/srv/intent.git"},
		{RepoURL: "git://example.com/intent.git"},
		{RepoURL: "ftp://example.com/intent.git"},
		{RepoURL: "/srv/git/intent.git"},
		{RepoURL: "../intent.git", Path: "../apps"},
		{RepoURL: "  https://example.com/x  \n"},
		{RepoURL: ""},
		{RepoURL: "ext::sh -c touch% /tmp/pwned"},
		{RepoURL: "fd::17"},
		{RepoURL: "intent.git"},
		{RepoURL: "/srv/git/../intent.git"},
		{RepoURL: "/srv/git/intent\n.git"},
		{RepoURL: "me@host:intent.git"},
		// Newlines, NULs and control characters where they could inject.
		{RepoURL: "https://example.com/x\n[core]\n\tsshCommand = evil"},
		{RepoURL: "https://example.com/x\x00y"},
		{RepoURL: "https://example.com/\xff\xfe"},
		{RepoURL: "http://example.com/x?\xae#\xff"},
		{RepoURL: "https://exa mple.com/x"},
		{RepoURL: "https://example.com/x", Branch: "main\n"},
		{RepoURL: "https://example.com/x", Branch: "ma\x00in"},
		{RepoURL: "https://example.com/x", Branch: "-delete"},
		{RepoURL: "https://example.com/x", Branch: "a/../b"},
		{RepoURL: "https://example.com/x", Branch: "a.lock"},
		{RepoURL: "https://example.com/x", Branch: "refs/heads/@{-1}"},
		{RepoURL: "https://example.com/x", Path: "apps\x00"},
		{RepoURL: "https://example.com/x", Path: "apps/\xff"},
		{RepoURL: "https://example.com/x", Path: "apps\n\x1b[2J"},
		{RepoURL: "https://example.com/x", Path: "a/../../etc"},
		{RepoURL: "https://example.com/x", Path: "a/.."},
		{RepoURL: "https://example.com/x", Path: "/etc"},
		{RepoURL: "https://example.com/x", Path: `a\..\b`},
		{RepoURL: "https://example.com/x", Path: "a/archive/b"},
		{RepoURL: "https://example.com/x", Path: ".../a"},
		{RepoURL: "https://example.com/x", SyncIntervalSec: -1},
		{RepoURL: "https://example.com/x", SyncIntervalSec: 1 << 62},
	} {
		f.Add(seed.RepoURL, seed.Branch, seed.Path, seed.SyncIntervalSec, seed.Token)
	}
	f.Fuzz(func(t *testing.T, repoURL, branch, prefix string, interval int, token string) {
		in := SettingsInput{RepoURL: repoURL, Branch: branch, Path: prefix, SyncIntervalSec: interval, Token: token}
		out, creds, err := normalizeInput(in)
		if err != nil {
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			return
		}

		require.Equal(t, cmp.Or(branch, "main"), out.Branch)
		require.NoError(t, plumbing.NewBranchReferenceName(out.Branch).Validate(), "%q", out.Branch)
		require.False(t, hasControl(out.Branch), "%q", out.Branch)
		require.NotContains(t, out.Branch, "..")
		require.False(t, strings.HasPrefix(out.Branch, "-"), "%q", out.Branch)

		require.False(t, hasDotDot(prefix), "accepted the path %q", prefix)
		require.False(t, hasDotDot(out.Path), "%q", out.Path)
		require.False(t, strings.HasPrefix(out.Path, "/"), "%q", out.Path)
		require.NotContains(t, out.Path, "\x00")
		require.True(t, utf8.ValidString(out.Path), "%q", out.Path)
		if out.Path != "" {
			require.Equal(t, path.Clean(out.Path), out.Path)
		}
		again, err := unit.ValidatePrefix(out.Path)
		require.NoError(t, err)
		require.Equal(t, out.Path, again)

		require.Equal(t, interval, out.SyncIntervalSec)
		require.GreaterOrEqual(t, out.SyncIntervalSec, 0)

		if !strings.Contains(out.RepoURL, "://") && creds.username != keepMarker {
			require.False(t, hasControl(out.RepoURL), "%q", out.RepoURL)
			require.True(t, utf8.ValidString(out.RepoURL), "%q", out.RepoURL)
			require.True(t, scpLike.MatchString(out.RepoURL) || (filepath.IsAbs(out.RepoURL) && filepath.Clean(out.RepoURL) == out.RepoURL), "%q", out.RepoURL)
			require.False(t, !scpLike.MatchString(out.RepoURL) && strings.Contains(out.RepoURL, "::"), "%q", out.RepoURL)
		}
		if creds.username == keepMarker {
			// The masked URL sent back: whether it stands for the stored
			// credentials is for storeSettingsTx, which requires the stored
			// URL to be this one.
			require.Contains(t, repoURL, redact.Mask+"@")
			require.Equal(t, strings.Replace(repoURL, redact.Mask+"@", "", 1), out.RepoURL)
			return
		}
		require.NotEmpty(t, out.RepoURL)
		require.Equal(t, strings.TrimSpace(out.RepoURL), out.RepoURL)
		if strings.Contains(out.RepoURL, "://") {
			requireCleanURL(t, out.RepoURL, creds, token)
		} else if !strings.Contains(out.RepoURL, "@") {
			require.True(t, filepath.IsAbs(out.RepoURL), "a local path kept relative: %q", out.RepoURL)
		}

		// Normalizing again changes nothing, now that the credentials are
		// out of the URL.
		out2, creds2, err := normalizeInput(SettingsInput{
			RepoURL: out.RepoURL, Branch: out.Branch, Path: out.Path, SyncIntervalSec: out.SyncIntervalSec,
		})
		require.NoError(t, err, "%+v", out)
		require.Equal(t, credentials{}, creds2)
		out.Token = ""
		require.Equal(t, out, out2)

		// The URL as the API shows it with stored credentials, sent back,
		// keeps them for this repository.
		if creds.password != "" {
			i := strings.Index(out.RepoURL, "://")
			masked := out.RepoURL[:i+3] + redact.Mask + "@" + out.RepoURL[i+3:]
			back, keep, err := normalizeInput(SettingsInput{RepoURL: masked, Branch: out.Branch, Path: out.Path})
			require.NoError(t, err)
			require.Equal(t, keepMarker, keep.username)
			require.Equal(t, out.RepoURL, back.RepoURL)
		}
	})
}

// requireCleanURL checks an accepted "://" URL: a scheme sluice fetches
// from, no control character, no credentials left in it (an SSH login name
// is no credential), and credentials that, put back as the Git client gets
// them, split off again unchanged.
func requireCleanURL(t *testing.T, raw string, creds credentials, token string) {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err, "%q", raw)
	require.Contains(t, []string{"https", "http", "ssh", "git", "file"}, u.Scheme)
	require.False(t, hasControl(raw), "%q", raw)
	if u.User != nil {
		_, hasPassword := u.User.Password()
		require.True(t, u.Scheme == "ssh" && !hasPassword, "credentials left in %q", raw)
		require.Equal(t, credentials{}, creds)
	}
	if creds.password == "" || token != "" {
		return
	}
	if creds.userOnly {
		require.Equal(t, "x-access-token", creds.username)
		u.User = url.User(creds.password)
	} else {
		u.User = url.UserPassword(creds.username, creds.password)
	}
	clean, again, err := splitURL(u.String())
	require.NoError(t, err, "%q", u.String())
	require.Equal(t, raw, clean, "the credentials belong to another URL once put back")
	require.Equal(t, creds, again)
}

// hasDotDot reports whether p has a ".." element, with either slash.
func hasDotDot(p string) bool {
	for elem := range strings.FieldsFuncSeq(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if elem == ".." {
			return true
		}
	}
	return false
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
