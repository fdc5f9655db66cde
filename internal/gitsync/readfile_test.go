package gitsync

import (
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
)

func TestReadFile(t *testing.T) {
	t.Parallel()

	b := setup(t)
	c1 := b.commit(t, "one", map[string]string{"secrets/db.env": "PASSWORD=one\n", "apps/web.json": `{}`})
	m := b.mirror(t, Remote{})
	_, err := m.Sync(b.ctx, "")
	require.NoError(t, err)
	b.Symlink(t, "secrets/link.env", "db.env")
	c2 := b.commit(t, "two", map[string]string{"secrets/db.env": "PASSWORD=two\n"})
	_, err = m.Sync(b.ctx, "")
	require.NoError(t, err)

	// Each commit's content, and a blob hash that names it.
	one, h1, err := m.ReadFile(b.ctx, c1, "secrets/db.env")
	require.NoError(t, err)
	require.Equal(t, "PASSWORD=one\n", string(one))
	two, h2, err := m.ReadFile(b.ctx, c2, "secrets/db.env")
	require.NoError(t, err)
	require.Equal(t, "PASSWORD=two\n", string(two))
	require.Len(t, h1, 40)
	require.NotEqual(t, h1, h2)
	_, again, err := m.ReadFile(b.ctx, c2, "apps/web.json")
	require.NoError(t, err)
	_, same, err := m.ReadFile(b.ctx, c1, "apps/web.json")
	require.NoError(t, err)
	require.Equal(t, same, again, "an unchanged file is the same blob")

	for _, tt := range []struct {
		commit, name string
		code         errs.Code
		msg          string
	}{
		{c2, "secrets/gone.env", errs.NotFound, "holds no file secrets/gone.env"},
		{c2, "secrets", errs.Invalid, "is a directory"},
		{c2, "secrets/link.env", errs.Invalid, "is a symbolic link"},
		{c2, "../etc/passwd", errs.Invalid, "relative to the repository root"},
		{"main", "secrets/db.env", errs.Invalid, "not a 40-hex commit hash"},
		{"0123456789012345678901234567890123456789", "secrets/db.env", errs.NotFound, "not in the local repository"},
	} {
		_, _, err := m.ReadFile(b.ctx, tt.commit, tt.name)
		require.True(t, errs.Is(err, tt.code), "%s %s: %v", tt.commit, tt.name, err)
		require.ErrorContains(t, err, tt.msg)
	}
}
