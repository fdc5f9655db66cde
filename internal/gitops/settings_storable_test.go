package gitops_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/gitops"
)

// A path with a NUL (the API's JSON can carry one as \u0000) used to reach
// PostgreSQL, which refused the write: an internal error instead of a
// refusal that names the path.
func TestPutSettingsRefusesAPathPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noStart: true})

	_, err := b.svc.PutSettings(b.ctx, gitops.SettingsInput{RepoURL: b.Bare, Branch: "main", Path: "apps\x00"})
	require.True(t, errs.Is(err, errs.Invalid), "%v", err)
	require.EqualError(t, err, `The path "apps\x00" is not allowed: a prefix is UTF-8 text without NUL characters; give the directory's name as Git shows it`)
}
