package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestString(t *testing.T) {
	t.Parallel()

	r := &Redactor{}
	r.Add("hunter2-secret", "ab") // "ab" is too short to register

	tests := []struct{ in, want string }{
		{"plain text about ab", "plain text about ab"},
		{"fetch https://user:pw@git.example/repo.git: 401", "fetch https://***@git.example/repo.git: 401"},
		{"ssh://git@host/x", "ssh://git@host/x"},
		{"fetch file://main@localhost/srv/intent.git (branch main)", "fetch file://main@localhost/srv/intent.git (branch main)"},
		{"ssh://deploy:pw@host/x", "ssh://deploy:***@host/x"},
		{"https://TOKEN:x-oauth-basic@github.example/r.git", "https://***@github.example/r.git"},
		{"HTTPS://tok@host/r.git", "HTTPS://***@host/r.git"},
		{"token hunter2-secret leaked", "token *** leaked"},
		{"Authorization: Bearer sluice_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "Authorization: Bearer sluice_***"},
		{"got sluice_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA here", "got sluice_*** here"},
		{"host=/tmp user=x password=pa55word dbname=y", "host=/tmp user=x password=*** dbname=y"},
		{"postgres://sluice:pw@localhost/db", "postgres://sluice:***@localhost/db"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, r.String(tt.in), "input %q", tt.in)
	}
}

func TestError(t *testing.T) {
	t.Parallel()

	r := &Redactor{}
	r.Add("s3cr3t-value")
	err := r.Error(fmt.Errorf("open s3cr3t-value: %w", fs.ErrNotExist))
	require.Equal(t, "open ***: file does not exist", err.Error())
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Nil(t, r.Error(nil))
	require.Same(t, err, r.Error(err), "redacting twice changes nothing")
}

func TestHandler(t *testing.T) {
	t.Parallel()

	r := &Redactor{}
	r.Add("s3cr3t-value")
	var buf bytes.Buffer
	logger := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), r)).
		With("url", "https://u:s3cr3t-value@h/x")

	logger.Info("using s3cr3t-value",
		"err", errors.New("auth s3cr3t-value"),
		slog.Group("g", "k", "s3cr3t-value"),
		"any", struct{ S string }{"s3cr3t-value"},
		"n", 3)

	out := buf.String()
	require.NotContains(t, out, "s3cr3t-value")
	require.Contains(t, out, `"n":3`)
	require.Contains(t, out, `"msg":"using ***"`)
}

// FuzzStringSkipsOnlyWhatCannotMatch checks String against the same masking
// with every pattern always run: the cheap tests that let String skip a
// pattern never skip text the pattern matches.
func FuzzStringSkipsOnlyWhatCannotMatch(f *testing.F) {
	for _, s := range []string{
		"", "apps/web.json", "plain text about ab",
		"Authorization: Bearer abcdefgh12345678", "AUTHORIZATION: BASIC dXNlcjpwYXNzd29yZA==",
		// (?i) folds the Kelvin sign to k and the long s to s.
		"bearer\u212a abcdefgh12345678", "ba\u017fic abcdefgh12345678", "\u017fecret=x",
		"PassWord=hunter2 host=x", "url=https://tok@host/r.git", "ssh://deploy:pw@host/x",
		"got sluice_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA here", "token=abc&secret=def",
	} {
		f.Add(s)
	}
	r := &Redactor{}
	r.Add("hunter2-secret")
	f.Fuzz(func(t *testing.T, s string) {
		want := s
		for _, secret := range r.secrets {
			want = strings.ReplaceAll(want, secret, Mask)
		}
		want = maskUserinfo(want)
		for _, sh := range shapes {
			want = sh.re.ReplaceAllString(want, sh.repl)
		}
		require.Equal(t, want, r.String(s), "input %q", s)
	})
}

// BenchmarkStringPath is the redaction of one path, which a sync of 10,000
// files pays 10,000 times.
func BenchmarkStringPath(b *testing.B) {
	r := &Redactor{}
	r.Add("hunter2-secret")
	for b.Loop() {
		_ = r.String("apps/team-07/service-01234.json")
	}
}
