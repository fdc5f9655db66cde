package gitsync

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/redact"
)

func TestNew(t *testing.T) {
	t.Parallel()

	abs, err := filepath.Abs("testdata/x.git")
	require.NoError(t, err)
	for _, tt := range []struct {
		name    string
		remote  Remote
		wantURL string
		wantErr string
	}{
		{name: "HTTPSWithUserinfo", remote: Remote{URL: "https://u:p%40ss@git.example.com/org/intent.git/"}, wantURL: "https://git.example.com/org/intent.git"},
		{name: "LocalPath", remote: Remote{URL: "testdata/x.git"}, wantURL: "file://" + abs},
		{name: "FileURL", remote: Remote{URL: "file:///srv/intent.git"}, wantURL: "file:///srv/intent.git"},
		{name: "SCPLike", remote: Remote{URL: "git@github.com:org/intent.git"}, wantURL: "git@github.com:org/intent.git"},
		{name: "SSHKeepsTheUser", remote: Remote{URL: "ssh://git:pw@host/intent.git"}, wantURL: "ssh://git@host/intent.git"},
		{name: "EmptyURL", remote: Remote{}, wantErr: "The remote URL is empty"},
		{name: "BadScheme", remote: Remote{URL: "ftp://host/x"}, wantErr: `scheme "ftp" is not supported`},
		{name: "BadBranch", remote: Remote{URL: "/x", Branch: "a..b"}, wantErr: `Branch "a..b" is not a valid`},
		{name: "TokenOverSSH", remote: Remote{URL: "git@host:x.git", Token: "tok_abcdef"}, wantErr: "A token works only with an https"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(Opts{Dir: t.TempDir(), Remote: tt.remote, Redactor: &redact.Redactor{}})
			if tt.wantErr != "" {
				require.Equal(t, errs.Invalid, errs.CodeOf(err))
				require.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantURL, m.ep.url)
			require.Equal(t, "main", m.branch)
		})
	}

	t.Run("RegistersSecrets", func(t *testing.T) {
		t.Parallel()
		r := &redact.Redactor{}
		_, err := New(Opts{Dir: t.TempDir(), Remote: Remote{URL: "https://u:p%40ssword@h/x.git", Token: "tok_abcdef"}, Redactor: r})
		require.NoError(t, err)
		require.Equal(t, "*** *** ***", r.String("p@ssword p%40ssword tok_abcdef"))

		_, err = New(Opts{Dir: t.TempDir(), Remote: Remote{URL: "https://ghp_tokenAsUser@h/x.git"}, Redactor: r})
		require.NoError(t, err)
		_, err = New(Opts{Dir: t.TempDir(), Remote: Remote{URL: "ssh://deploy@h/x.git"}, Redactor: r})
		require.NoError(t, err)
		require.Equal(t, "*** deployment", r.String("ghp_tokenAsUser deployment"))
	})

	t.Run("RegistersNoUserName", func(t *testing.T) {
		t.Parallel()
		r := &redact.Redactor{}
		for _, u := range []string{"https://main:pw-NotMain-19@h/x.git", "file://main@localhost/srv/x.git", "git://main@h/x.git", "ssh://main@h/x.git"} {
			_, err := New(Opts{Dir: t.TempDir(), Remote: Remote{URL: u}, Redactor: r})
			require.NoError(t, err, u)
		}
		require.Equal(t, "branch main, password ***", r.String("branch main, password pw-NotMain-19"))
	})
}
