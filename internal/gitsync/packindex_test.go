package gitsync

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/stretchr/testify/require"
)

// gitPack packs every object of the repository at dir with the git CLI
// (pack-objects with args) and returns the paths of the pack and of the
// index git wrote for it.
func gitPack(t *testing.T, dir string, args ...string) (pack, idx string) {
	t.Helper()
	objects := gitCmd(t, dir, "rev-list", "--objects", "--all")
	cmd := exec.Command("git", append([]string{"pack-objects", "-q"}, append(args, filepath.Join(t.TempDir(), "p"))...)...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, gitEnv, strings.NewReader(objects+"\n")
	out, err := cmd.Output()
	require.NoError(t, err)
	name := strings.TrimSpace(string(out))
	base := filepath.Join(filepath.Dir(cmd.Args[len(cmd.Args)-1]), "p-"+name)
	return base + ".pack", base + ".idx"
}

// receive writes the pack at path through packStore's writer into a new
// object store, as a fetch does, and returns the store's .git directory.
func receive(t *testing.T, path string) string {
	t.Helper()
	return receiveInto(t, path, cache.NewObjectLRUDefault())
}

// receiveInto is receive with the store's object cache c.
func receiveInto(t *testing.T, path string, c cache.Object) string {
	t.Helper()
	gitDir := filepath.Join(t.TempDir(), ".git")
	st := newPackStore(gitDir, c, filesystem.Options{})
	defer st.Close()
	w, err := st.PackfileWriter()
	require.NoError(t, err)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = io.Copy(w, f)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return gitDir
}

// A pack received is indexed as git indexes it, byte for byte, when its
// objects are deltas of deltas, based by offset or by hash, on bases small
// and over StreamAbove (held in a temporary file); and the store reads its
// objects at once.
func TestPackWriterIndexesAsGit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gitCmd(t, dir, "init", "-q")
	raw := make([]byte, StreamAbove/2+1024)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	big := hex.EncodeToString(raw) // over StreamAbove
	var last string
	for c := range 6 {
		for i := range 20 {
			p := filepath.Join(dir, "apps", fmt.Sprintf("cfg-%02d.json", i))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, fmt.Appendf(nil, `{"kind": "Config", "metadata": {"name": "cfg-%02d"}, "spec": {"n": %d, "pad": %q}}`, i, c, strings.Repeat("x", 300)), 0o644))
		}
		big += fmt.Sprintf("\nline %d", c)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o644))
		gitCmd(t, dir, "add", "-A")
		gitCmd(t, dir, "commit", "-q", "-m", fmt.Sprintf("commit %d", c))
		last = gitCmd(t, dir, "rev-parse", "HEAD:big.txt")
	}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"OffsetDeltas", []string{"--window=50", "--depth=50", "--delta-base-offset"}},
		{"RefDeltas", []string{"--window=50", "--depth=50"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pack, idx := gitPack(t, dir, tc.args...)
			deltas, bigBases, maxDepth := packShape(t, idx)
			require.Greater(t, deltas, 50, "the fixture must make deltas")
			require.Positive(t, bigBases, "some delta must be based on an object over StreamAbove")
			require.Greater(t, maxDepth, 1, "some delta must be based on a delta")

			gitDir := receive(t, pack)
			name := filepath.Base(strings.TrimSuffix(idx, ".idx"))[len("p-"):]
			want, err := os.ReadFile(idx)
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(gitDir, "objects", "pack", "pack-"+name+".idx"))
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "the index differs from git's")
			entries, err := os.ReadDir(filepath.Join(gitDir, "objects", "pack"))
			require.NoError(t, err)
			require.Len(t, entries, 2, "the pack and its index, no temporary file")

			st := newPackStore(gitDir, cache.NewObjectLRUDefault(), filesystem.Options{})
			defer st.Close()
			blob, err := object.GetBlob(st, plumbing.NewHash(last))
			require.NoError(t, err)
			r, err := blob.Reader()
			require.NoError(t, err)
			data, err := io.ReadAll(r)
			require.NoError(t, err)
			require.NoError(t, r.Close())
			require.Equal(t, big, string(data))
		})
	}
}

// Every object of a received pack up to StreamAbove, whole or made from a
// delta, is in the store's object cache once the pack is indexed, with the
// type and size git gives it and a content that hashes to its name; a
// larger one is not.
func TestPackWriterKeepsSmallObjects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gitCmd(t, dir, "init", "-q")
	raw := make([]byte, StreamAbove/2+1024)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	big := hex.EncodeToString(raw) // over StreamAbove
	for c := range 3 {
		for i := range 20 {
			p := filepath.Join(dir, "apps", fmt.Sprintf("cfg-%02d.json", i))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, fmt.Appendf(nil, `{"kind": "Config", "metadata": {"name": "cfg-%02d"}, "spec": {"n": %d, "pad": %q}}`, i, c, strings.Repeat("x", 300)), 0o644))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big+fmt.Sprint(c)), 0o644))
		gitCmd(t, dir, "add", "-A")
		gitCmd(t, dir, "commit", "-q", "-m", fmt.Sprintf("commit %d", c))
	}
	pack, idx := gitPack(t, dir, "--window=50", "--depth=50", "--delta-base-offset")
	deltas, _, _ := packShape(t, idx)
	require.Greater(t, deltas, 20, "the fixture must make deltas")

	c := cache.NewObjectLRUDefault()
	receiveInto(t, pack, c)
	small, large := 0, 0
	for line := range strings.Lines(gitCmd(t, dir, "cat-file", "--batch-all-objects", "--batch-check")) {
		f := strings.Fields(line) // hash type size
		require.Len(t, f, 3)
		size, err := strconv.Atoi(f[2])
		require.NoError(t, err)
		obj, ok := c.Get(plumbing.NewHash(f[0]))
		if size > StreamAbove {
			require.False(t, ok, "%s of %d bytes is kept", f[0], size)
			large++
			continue
		}
		require.True(t, ok, "%s %s is not kept", f[1], f[0])
		require.Equal(t, f[0], obj.Hash().String())
		require.Equal(t, f[1], obj.Type().String())
		r, err := obj.Reader()
		require.NoError(t, err)
		data, err := io.ReadAll(r)
		require.NoError(t, err)
		require.Len(t, data, size, "%s %s", f[1], f[0])
		require.Equal(t, f[0], plumbing.ComputeHash(obj.Type(), data).String(), "the content kept is the object's")
		small++
	}
	require.Positive(t, large)
	require.Greater(t, small, 60)
}

// packShape reads git verify-pack's account of a pack: how many deltas it
// holds, how many are based on an object over StreamAbove, and the longest
// chain.
func packShape(t *testing.T, idx string) (deltas, bigBases, maxDepth int) {
	t.Helper()
	sizes := map[string]int{}
	var bases []string
	for line := range strings.Lines(gitCmd(t, filepath.Dir(idx), "verify-pack", "-v", idx)) {
		f := strings.Fields(line)
		if len(f) < 5 || !plumbing.IsHash(f[0]) {
			continue
		}
		size, err := strconv.Atoi(f[2])
		require.NoError(t, err)
		sizes[f[0]] = size
		if len(f) == 7 {
			depth, err := strconv.Atoi(f[5])
			require.NoError(t, err)
			deltas, maxDepth = deltas+1, max(maxDepth, depth)
			bases = append(bases, f[6])
		}
	}
	for _, b := range bases {
		if sizes[b] > StreamAbove {
			bigBases++
		}
	}
	return deltas, bigBases, maxDepth
}

// A pack is indexed with memory that does not follow its largest object:
// receiving one that holds a 32 MiB blob and a delta of it allocates a few
// hundred KiB in all (go-git's own pack writer allocated the blob's size).
// Not parallel: it reads the process's allocation counter, and the parallel
// tests run after it.
func TestPackWriterMemoryIsBounded(t *testing.T) {
	dir := t.TempDir()
	gitCmd(t, dir, "init", "-q")
	raw := make([]byte, 32<<20)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	for i := range 2 {
		raw[i*1000] ^= 0xff
		require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), raw, 0o644))
		gitCmd(t, dir, "add", "-A")
		gitCmd(t, dir, "commit", "-q", "-m", "big")
	}
	raw = nil
	pack, idx := gitPack(t, dir, "--delta-base-offset")
	_, bigBases, _ := packShape(t, idx)
	require.Equal(t, 1, bigBases, "one version of the blob must be a delta of the other")

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	receive(t, pack)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(4<<20), "receiving the pack allocated %d bytes", allocated)
}

func TestCheckPackHeaders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, b []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o444))
	}
	write("pack-aaaa.pack", append([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x01"), make([]byte, 20)...))
	write("pack-aaaa.idx", []byte("not read")) // only packs are checked
	require.NoError(t, checkPackHeaders(dir))
	write("pack-bbbb.pack", []byte("random bytes, as a failing disk leaves them"))
	err := checkPackHeaders(dir)
	require.ErrorContains(t, err, "pack pack-bbbb.pack is damaged: it does not begin as a git pack")
}
