package source_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/source"
)

func TestPolicy(t *testing.T) {
	t.Parallel()

	t.Run("PolicyIsSetThroughSourcesAndCheckedByTheDatabase", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		require.Equal(t, "auto-write", b.source(t).Policy, "the default source keeps today's behaviour")
		other := b.Bare
		src, err := b.svc.Create(b.ctx, source.Input{Name: "apps", Policy: source.PolicyReview, SettingsInput: source.SettingsInput{RepoURL: other}}, "test")
		require.NoError(t, err)
		require.Equal(t, source.PolicyReview, src.Policy)
		src, err = b.svc.Update(b.ctx, "apps", source.Input{SettingsInput: source.SettingsInput{RepoURL: other}}, "test")
		require.NoError(t, err)
		require.Equal(t, source.PolicyReview, src.Policy, "no policy keeps it")
		_, err = b.svc.Create(b.ctx, source.Input{Name: "bad", Policy: "yolo", SettingsInput: source.SettingsInput{RepoURL: other}}, "test")
		require.True(t, errs.Is(err, errs.Invalid))
		_, err = b.pool.Exec(b.ctx, `UPDATE source SET policy = 'yolo' WHERE id = $1`, src.ID)
		require.Error(t, err)
	})
}
