package gitsync

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// A file over StreamAbove is copied to the working tree from its pack a
// piece at a time: on a first checkout (created), and over an older copy
// (replaced), with an executable bit, and the index git trusts.
func TestSyncStreamsBigFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bigOf := func() string {
		raw := make([]byte, StreamAbove) // hex doubles it: over the bound
		_, err := rand.Read(raw)
		require.NoError(t, err)
		return hex.EncodeToString(raw)
	}
	first, second := bigOf(), bigOf()
	files := map[string]string{"blobs/big.bin": first}
	for p, c := range units {
		files[p] = c
	}
	c1 := b.commit(t, "a big file", files)
	m := b.mirror(t, Remote{})
	_, err := m.Sync(b.ctx, "")
	require.NoError(t, err)
	require.Equal(t, first, b.read(t, "blobs/big.bin"))
	b.requireCleanCheckout(t, c1)

	c2 := b.commit(t, "another", map[string]string{"blobs/big.bin": second, "blobs/small.txt": "small"})
	_, err = m.Sync(b.ctx, "")
	require.NoError(t, err)
	require.Equal(t, second, b.read(t, "blobs/big.bin"))
	require.Equal(t, "small", b.read(t, "blobs/small.txt"))
	b.requireCleanCheckout(t, c2)
}
