package unit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
)

// A prefix with a NUL or bytes that are not UTF-8 used to pass, and then
// the settings' write failed in PostgreSQL with an internal error instead of
// saying what is wrong with the path.
func TestValidatePrefixRefusesWhatCannotBeStored(t *testing.T) {
	t.Parallel()

	for _, prefix := range []string{"apps\x00", "\x00", "a/\x00/b", "caf\xe9", "apps/\xff", "\xed\xa0\x80"} {
		_, err := ValidatePrefix(prefix)
		require.EqualError(t, err, "a prefix is UTF-8 text without NUL characters; give the directory's name as Git shows it", "prefix %q", prefix)
		require.True(t, errs.Is(err, errs.Invalid), "prefix %q", prefix)
		require.False(t, InPrefix("apps/web.json", prefix), "prefix %q", prefix)
	}
	for _, prefix := range []string{"café", "apps/\u2028", "a\tb"} {
		got, err := ValidatePrefix(prefix)
		require.NoError(t, err, "a directory may have this name: %q", prefix)
		require.Equal(t, prefix, got)
	}
}
