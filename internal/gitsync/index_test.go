package gitsync

import (
	"bufio"
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/stretchr/testify/require"
)

func TestIndexCodec(t *testing.T) {
	t.Parallel()

	entries := func() []*index.Entry {
		when := time.Unix(1_700_000_000, 123_456_789)
		return []*index.Entry{
			{Name: "b/long/" + strings.Repeat("x", 5000) + ".json", Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte("b")), Mode: filemode.Regular, Size: 1, ModifiedAt: when, CreatedAt: when, Dev: 7, Inode: 8, UID: 9, GID: 10},
			{Name: "a.json", Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte("a")), Mode: filemode.Executable, Size: 12, ModifiedAt: when},
			{Name: "link", Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte("a.json")), Mode: filemode.Symlink, SkipWorktree: true},
			{Name: "sub", Hash: plumbing.ComputeHash(plumbing.CommitObject, []byte("c")), Mode: filemode.Submodule},
		}
	}

	t.Run("GoGitReadsWhatItWrites", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		require.NoError(t, encodeIndex(w, &index.Index{Entries: entries()}))
		require.NoError(t, w.Flush())
		got := &index.Index{}
		require.NoError(t, index.NewDecoder(&buf).Decode(got))
		require.Equal(t, uint32(3), got.Version, "an entry with extended flags makes it version 3")
		want := entries()
		require.Len(t, got.Entries, len(want))
		for _, name := range []string{"a.json", "b/long/" + strings.Repeat("x", 5000) + ".json", "link", "sub"} {
			e, err := got.Entry(name)
			require.NoError(t, err)
			require.Equal(t, name, e.Name)
		}
		require.Equal(t, "a.json", got.Entries[0].Name, "sorted by name")
	})

	t.Run("ReadsWhatGoGitAndGitWrite", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		want := &index.Index{Version: 3, Entries: entries()}
		require.NoError(t, index.NewEncoder(&buf).Encode(want))
		got, err := decodeIndex(buf.Bytes())
		require.NoError(t, err)
		require.Equal(t, want.Entries, got.Entries)

		// The git CLI's own index, with its extensions.
		b := setup(t)
		b.commit(t, "one", units)
		idx, err := readIndex(filepath.Join(b.pusher, ".git"))
		require.NoError(t, err)
		require.Len(t, idx.Entries, len(units))
		require.False(t, idx.ModTime.IsZero())
	})

	t.Run("RefusesADamagedIndex", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		require.NoError(t, encodeIndex(w, &index.Index{Entries: entries()}))
		require.NoError(t, w.Flush())
		data := buf.Bytes()
		data[40] ^= 1
		_, err := decodeIndex(data)
		require.ErrorContains(t, err, "checksum")
		_, err = decodeIndex(data[:30])
		require.Error(t, err)
	})
}
