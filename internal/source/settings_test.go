package source_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/source"
)

func TestPutSettings(t *testing.T) {
	t.Parallel()

	t.Run("RefusesPathsOutsideTheRepository", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		for _, p := range []string{"../x", "/etc", "a/../b", "..", `apps\web`, "apps/.git", "archive/old"} {
			_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Path: p}, "test")
			require.Equal(t, errs.Invalid, errs.CodeOf(err), "path %q: %v", p, err)
			require.Contains(t, err.Error(), "is not allowed: ", "path %q", p)
		}
		for p, want := range map[string]string{"apps/": "apps", "./apps": "apps", ".": "", "apps/web": "apps/web"} {
			out, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Path: p}, "test")
			require.NoError(t, err, "path %q", p)
			require.Equal(t, want, out.Path)
		}
	})

	t.Run("RefusesBranchesGitRefuses", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		for _, br := range []string{"has space", "a..b", "a:b", "a~1", "x.lock", "/main", "main/", "-main", "a//b", "a@{1}", ".hidden", "a/.b", "@", "main."} {
			_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: br}, "test")
			require.Equal(t, errs.Invalid, errs.CodeOf(err), "branch %q: %v", br, err)
			require.Contains(t, err.Error(), "is not a valid Git branch name")
		}
		for _, br := range []string{"main", "feature/x", "release-1.2"} {
			out, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: br}, "test")
			require.NoError(t, err, "branch %q", br)
			require.Equal(t, br, out.Branch)
		}
		out, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare}, "test")
		require.NoError(t, err)
		require.Equal(t, "main", out.Branch, "no branch means main")
	})

	t.Run("RefusesNegativeIntervalAndBadURLs", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, SyncIntervalSec: -1}, "test")
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		for _, u := range []string{"", "  ", "ftp://example.com/x.git", "http://u:pw@[::1/x"} {
			_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: u}, "test")
			require.Equal(t, errs.Invalid, errs.CodeOf(err), "url %q", u)
			require.NotContains(t, err.Error(), ":pw")
		}
		require.Zero(t, b.count(t, "SELECT count(*) FROM source"))
	})

	t.Run("RefusesMaskedCredentialsForAnotherRepository", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		const secret = "pw-Sup3rSecret"

		_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "https://***@git.example.com/team/a.git"}, "test")
		require.Equal(t, errs.Invalid, errs.CodeOf(err), "nothing is stored to keep")

		out, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "https://deployer:" + secret + "@git.example.com/team/a.git"}, "test")
		require.NoError(t, err)
		require.Equal(t, "https://***@git.example.com/team/a.git", out.RepoURL)

		for _, other := range []string{"https://***@git.example.com/team/b.git", "https://***@evil.example.com/team/a.git", "http://***@git.example.com/team/a.git"} {
			_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: other}, "test")
			require.Equal(t, errs.Invalid, errs.CodeOf(err), "url %q", other)
			require.NotContains(t, err.Error(), secret)
		}
		src := b.source(t)
		require.Equal(t, "https://git.example.com/team/a.git", src.RepoUrl)
		require.Equal(t, secret, b.secret(t, src))

		// Another repository with credentials of its own is fine.
		out, err = b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "https://deployer:other-Secret@git.example.com/team/b.git"}, "test")
		require.NoError(t, err)
		require.Equal(t, "https://***@git.example.com/team/b.git", out.RepoURL)
		require.Equal(t, "other-Secret", b.secret(t, b.source(t)))

		// Another repository without credentials does not inherit them.
		_, err = b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "https://git.example.com/team/c.git"}, "test")
		require.NoError(t, err)
		require.Nil(t, b.source(t).RepoPasswordSealed)
	})

	t.Run("KeepsSSHLoginName", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		out, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "ssh://git@git.example.com/team/intent.git"}, "test")
		require.NoError(t, err)
		require.Equal(t, "ssh://git@git.example.com/team/intent.git", out.RepoURL)
		out, err = b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "git@git.example.com:team/intent.git"}, "test")
		require.NoError(t, err)
		require.Equal(t, "git@git.example.com:team/intent.git", out.RepoURL)
	})
}

func TestSeed(t *testing.T) {
	t.Parallel()

	t.Run("StoresOnceAndMasksStoredSecretsAfterARestart", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		const token = "tok_Seed3dSecretValue"
		require.NoError(t, b.svc.Seed(b.ctx, source.SettingsInput{}, false), "no repository: nothing to seed")
		require.Zero(t, b.count(t, "SELECT count(*) FROM source"))

		require.NoError(t, b.svc.Seed(b.ctx, source.SettingsInput{RepoURL: "https://git.example.com/a.git", Token: token}, false))
		out, err := b.svc.GetSettings(b.ctx)
		require.NoError(t, err)
		require.Equal(t, "https://***@git.example.com/a.git", out.RepoURL)
		require.Equal(t, source.DefaultInterval, out.SyncIntervalSec)
		require.Equal(t, "main", out.Branch)

		// A restart: a new process with its own redactor and other settings.
		red := &redact.Redactor{}
		svc := source.New(b.pool, journal.New(b.pool, nil, red), red, nil)
		svc.Secrets = b.box
		require.NoError(t, svc.Seed(b.ctx, source.SettingsInput{RepoURL: "https://git.example.com/b.git", SyncIntervalSec: 5}, true))
		out, err = svc.GetSettings(b.ctx)
		require.NoError(t, err)
		require.Equal(t, "https://***@git.example.com/a.git", out.RepoURL, "stored settings win")
		require.Equal(t, "fetch failed with "+redact.Mask, red.String("fetch failed with "+token))
	})
}

func TestCredentialsGivenTwoWays(t *testing.T) {
	t.Parallel()

	const token = "tok-Twice-3c9d17"

	t.Run("PasswordInTheURLAndATokenAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{noSettings: true})
		_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: "https://deployer:pw-Twice-77aa@git.example.com/a.git", Token: token}, "test")
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.Equal(t, "The repository URL carries a password and a token is given too, so one of them would be ignored; drop the password from the URL, or drop the token.", err.Error())
		err = b.svc.Seed(b.ctx, source.SettingsInput{RepoURL: "https://deployer:pw-Twice-77aa@git.example.com/a.git", Token: token}, false)
		require.Equal(t, errs.Invalid, errs.CodeOf(err))
		require.Zero(t, b.count(t, "SELECT count(*) FROM source"))
	})
}

// A path with a NUL (the API's JSON can carry one as \u0000) used to reach
// PostgreSQL, which refused the write: an internal error instead of a
// refusal that names the path.
func TestPutSettingsRefusesAPathPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})

	_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Branch: "main", Path: "apps\x00"}, "test")
	require.True(t, errs.Is(err, errs.Invalid), "%v", err)
	require.EqualError(t, err, `The path "apps\x00" is not allowed: a prefix is UTF-8 text without NUL characters; give the directory's name as Git shows it`)
}

// A repository given without "://" is git@host:repo or an absolute path:
// a relative path would be resolved against serve's working directory,
// and Git's transport::address form runs programs.
func TestPutSettingsRefusesRelativeAndTransportRepositories(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})

	for raw, want := range map[string]string{
		"intent.git":                   `The repository path "intent.git" is relative, and would be resolved against serve's working directory: give an absolute path (or a file:// URL).`,
		"../intent.git":                `The repository path "../intent.git" is relative, and would be resolved against serve's working directory: give an absolute path (or a file:// URL).`,
		"ext::sh -c touch% /tmp/hit":   `The repository "ext::sh -c touch% /tmp/hit" uses Git's transport::address form, which sluice does not take: give an https, ssh, git or file URL, or an absolute path.`,
		"fd::17":                       `The repository "fd::17" uses Git's transport::address form, which sluice does not take: give an https, ssh, git or file URL, or an absolute path.`,
		"/srv/git/intent\n[core]x.git": `The repository "/srv/git/intent\n[core]x.git" holds a control character.`,
	} {
		_, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: raw, Branch: "main"}, "test")
		require.True(t, errs.Is(err, errs.Invalid), "%q: %v", raw, err)
		require.EqualError(t, err, want)
	}
	s, err := b.svc.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare + "/.", Branch: "main"}, "test")
	require.NoError(t, err)
	require.Equal(t, b.Bare, s.RepoURL, "an absolute path is kept, cleaned")
}
