package services

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/db"
)

func TestSpecCache(t *testing.T) {
	t.Parallel()

	unitOf := func(name, digest, hash string) *db.Unit {
		return &db.Unit{Name: name, ContentHash: hash, Content: []byte(fmt.Sprintf(
			`{"kind": "Service", "metadata": {"name": %q}, "spec": {"runtime": "exec", "image": %q}}`, name, digest))}
	}
	d1, d2 := "sha256:"+strings.Repeat("1", 64), "sha256:"+strings.Repeat("2", 64)

	t.Run("AHitIsTheSpecOfThatContentAndName", func(t *testing.T) {
		t.Parallel()
		var c specCache
		first, err := c.parse(t.Context(), nil, unitOf("web", d1, "h1"))
		require.NoError(t, err)
		again, err := c.parse(t.Context(), nil, unitOf("web", d1, "h1"))
		require.NoError(t, err)
		require.Same(t, first, again, "the same content is parsed once")

		// New content has a new hash: its own spec, never the old one.
		moved, err := c.parse(t.Context(), nil, unitOf("web", d2, "h2"))
		require.NoError(t, err)
		require.Equal(t, d2, moved.Digest())
		require.Equal(t, d1, first.Digest())

		// Another service with the same content is parsed for its own name.
		other, err := c.parse(t.Context(), nil, unitOf("api", d1, "h1"))
		require.NoError(t, err)
		require.NotSame(t, first, other)
	})

	t.Run("AnInvalidSpecIsNotKept", func(t *testing.T) {
		t.Parallel()
		var c specCache
		bad := &db.Unit{Name: "web", ContentHash: "h", Content: []byte(`{"kind": "Service", "spec": {"runtime": "exec", "image": "nginx"}}`)}
		_, err := c.parse(t.Context(), nil, bad)
		require.Error(t, err)
		_, err = c.parse(t.Context(), nil, bad)
		require.Error(t, err)
		require.Empty(t, c.m)
	})

	t.Run("StaysWithinItsSize", func(t *testing.T) {
		t.Parallel()
		var c specCache
		for i := range specCacheSize + 10 {
			_, err := c.parse(t.Context(), nil, unitOf("web", d1, fmt.Sprint(i)))
			require.NoError(t, err)
			require.LessOrEqual(t, len(c.m), specCacheSize)
		}
		require.Equal(t, 10, len(c.m), "cleared when full, then filled again")
	})
}
