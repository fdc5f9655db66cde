package artifactstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/artifactstore"
	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	pool  *pgxpool.Pool
	store *artifactstore.Store
}

// receipts lists the finished receipts as "action target by requester".
func receipts(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT action || ' ' || target || ' by ' || requested_by FROM journal_run
		WHERE state = 'succeeded' ORDER BY requested_at, id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	return &testBundle{pool: pool, store: &artifactstore.Store{Pool: pool, CacheDir: t.TempDir(), Journal: journal.New(pool, nil, nil)}}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return digestOf(b)
}

// requireContent reads the stored artifact digest whole and requires it to
// be content.
func (b *testBundle) requireContent(t *testing.T, digest string, content []byte) {
	t.Helper()
	rc, err := b.store.Open(context.Background(), digest)
	require.NoError(t, err)
	read, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.True(t, bytes.Equal(content, read))
}

func countRows(t *testing.T, pool *pgxpool.Pool, table, digest string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE digest = $1", digest).Scan(&n))
	return n
}

func TestPut(t *testing.T) {
	t.Parallel()

	t.Run("MultiChunkFileRoundTripsThroughStatAndOpen", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		content := randomBytes(t, 3*artifactstore.ChunkSize+artifactstore.ChunkSize/2)

		info, err := b.store.Put(ctx, bytes.NewReader(content), "test")
		require.NoError(t, err)
		require.Equal(t, digestOf(content), info.Digest)
		require.Equal(t, int64(len(content)), info.Size)
		require.WithinDuration(t, time.Now(), info.CreatedAt, time.Minute, "Put names when it stored the artifact")
		require.Equal(t, 4, countRows(t, b.pool, "artifact_chunk", info.Digest))

		got, err := b.store.Stat(ctx, info.Digest)
		require.NoError(t, err)
		require.NotEqual(t, uuid.Nil, info.JournalID)
		info.JournalID = uuid.Nil // Stat reads; only Put names a receipt
		require.Equal(t, info, got)
		got, err = b.store.Stat(ctx, "web@"+info.Digest)
		require.NoError(t, err)
		require.Equal(t, info, got)

		b.requireContent(t, info.Digest, content)

		entries, err := os.ReadDir(b.store.CacheDir)
		require.NoError(t, err)
		require.Empty(t, entries, "Put removes its staging file")
	})

	t.Run("ChunksAreCompressedWithLZ4WhereTheServerHasIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		// Compressible, as an executable is: PostgreSQL compresses it.
		content := bytes.Repeat([]byte("sluice artifact chunk "), artifactstore.ChunkSize/11)
		info, err := b.store.Put(ctx, bytes.NewReader(content), "test")
		require.NoError(t, err)

		var supported bool
		require.NoError(t, b.pool.QueryRow(ctx,
			`SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals))`).Scan(&supported))
		want := "pglz"
		if supported {
			want = "lz4"
		}
		rows, err := b.pool.Query(ctx, `SELECT pg_column_compression(data) FROM artifact_chunk WHERE digest = $1`, info.Digest)
		require.NoError(t, err)
		methods, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Len(t, methods, 2)
		for _, m := range methods {
			require.Equal(t, want, m)
		}

		b.requireContent(t, info.Digest, content)
	})

	t.Run("ExactChunkMultipleAndOneByteFileRoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		for _, content := range [][]byte{randomBytes(t, 2*artifactstore.ChunkSize), []byte("x")} {
			info, err := b.store.Put(ctx, iotest.HalfReader(bytes.NewReader(content)), "test")
			require.NoError(t, err)
			require.Equal(t, digestOf(content), info.Digest)
			require.Equal(t, (len(content)+artifactstore.ChunkSize-1)/artifactstore.ChunkSize, countRows(t, b.pool, "artifact_chunk", info.Digest))
			b.requireContent(t, info.Digest, content)
		}
	})

	t.Run("SameContentTwiceIsIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		content := randomBytes(t, artifactstore.ChunkSize+10)

		first, err := b.store.Put(ctx, bytes.NewReader(content), "alice")
		require.NoError(t, err)
		second, err := b.store.Put(ctx, bytes.NewReader(content), "bob")
		require.NoError(t, err)
		require.NotEqual(t, uuid.Nil, first.JournalID, "the upload that stored the bytes has a receipt")
		require.Equal(t, uuid.Nil, second.JournalID, "one that stored nothing has none")
		second.JournalID = first.JournalID
		require.Equal(t, first, second)
		require.Equal(t, []string{artifactstore.ActionPut + " " + first.Digest + " by alice"}, receipts(t, b.pool))
		require.Equal(t, 1, countRows(t, b.pool, "artifact", first.Digest))
		require.Equal(t, 2, countRows(t, b.pool, "artifact_chunk", first.Digest))
	})

	t.Run("ConcurrentPutsOfSameContentAllSucceedWithOneRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		content := randomBytes(t, 2*artifactstore.ChunkSize+1)

		var wg sync.WaitGroup
		infos := make([]artifactstore.Info, 10)
		putErrs := make([]error, 10)
		for i := range 10 {
			wg.Go(func() { infos[i], putErrs[i] = b.store.Put(ctx, bytes.NewReader(content), "test") })
		}
		wg.Wait()
		for i := range 10 {
			require.NoError(t, putErrs[i])
			require.Equal(t, digestOf(content), infos[i].Digest)
		}
		require.Equal(t, 1, countRows(t, b.pool, "artifact", digestOf(content)))
		require.Equal(t, 3, countRows(t, b.pool, "artifact_chunk", digestOf(content)))
		require.Len(t, receipts(t, b.pool), 1, "one upload stored the bytes, and has the one receipt")
	})

	t.Run("AnEmptyBodyIsInvalidAndStoresNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		_, err := b.store.Put(ctx, bytes.NewReader(nil), "test")
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		require.EqualError(t, err, "The artifact is empty: send the executable's bytes as the request body; nothing was stored.")
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM artifact) + (SELECT count(*) FROM artifact_chunk) + (SELECT count(*) FROM journal_run)").Scan(&n))
		require.Zero(t, n)
	})

	t.Run("LargerThanMaxSizeIsInvalidAndStoresNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		b.store.MaxSize = artifactstore.ChunkSize + 100

		_, err := b.store.Put(ctx, bytes.NewReader(randomBytes(t, artifactstore.ChunkSize+101)), "test")
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		require.ErrorContains(t, err, "larger than the limit")
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM artifact) + (SELECT count(*) FROM artifact_chunk)").Scan(&n))
		require.Zero(t, n)

		info, err := b.store.Put(ctx, bytes.NewReader(randomBytes(t, artifactstore.ChunkSize+100)), "test")
		require.NoError(t, err, "exactly MaxSize is allowed")
		require.EqualValues(t, artifactstore.ChunkSize+100, info.Size)
	})

	t.Run("ReaderErrorIsReturnedAndStoresNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		boom := io.MultiReader(bytes.NewReader(randomBytes(t, 1000)), errReader{})
		_, err := b.store.Put(ctx, boom, "test")
		require.ErrorContains(t, err, "client went away")
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM artifact").Scan(&n))
		require.Zero(t, n)
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("client went away") }

func TestStatAndOpen(t *testing.T) {
	t.Parallel()

	t.Run("UnknownDigestIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		unknown := digestOf([]byte("never stored"))
		_, err := b.store.Stat(ctx, unknown)
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		_, err = b.store.Open(ctx, unknown)
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		_, err = b.store.Materialize(ctx, unknown)
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		_, err = os.Stat(filepath.Join(b.store.CacheDir, strings.TrimPrefix(unknown, "sha256:")))
		require.ErrorIs(t, err, os.ErrNotExist)
	})

	t.Run("MalformedDigestIsInvalid", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		for _, d := range []string{"sha256:abc", "../../etc/passwd", strings.Repeat("a", 64)} {
			_, err := b.store.Stat(ctx, d)
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			_, err = b.store.Open(ctx, d)
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			_, err = b.store.Materialize(ctx, d)
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		}
	})

	t.Run("CorruptChunkFailsTheReadInsteadOfEndingIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		content := randomBytes(t, artifactstore.ChunkSize+5)
		info, err := b.store.Put(ctx, bytes.NewReader(content), "test")
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, "UPDATE artifact_chunk SET data = set_byte(data, 0, get_byte(data, 0) # 1) WHERE digest = $1 AND seq = 1", info.Digest)
		require.NoError(t, err)

		rc, err := b.store.Open(ctx, info.Digest)
		require.NoError(t, err)
		_, err = io.ReadAll(rc)
		require.ErrorContains(t, err, "is corrupt")

		_, err = b.store.Materialize(ctx, info.Digest)
		require.ErrorContains(t, err, "is corrupt")
		entries, err := os.ReadDir(b.store.CacheDir)
		require.NoError(t, err)
		require.Empty(t, entries, "a failed fetch leaves no file, final or temporary")
	})

	t.Run("MissingChunkFailsTheRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		info, err := b.store.Put(ctx, bytes.NewReader(randomBytes(t, 2*artifactstore.ChunkSize+5)), "test")
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, "DELETE FROM artifact_chunk WHERE digest = $1 AND seq = 1", info.Digest)
		require.NoError(t, err)

		rc, err := b.store.Open(ctx, info.Digest)
		require.NoError(t, err)
		_, err = io.ReadAll(rc)
		require.ErrorContains(t, err, "missing chunk 1")
	})
}

func TestMaterialize(t *testing.T) {
	t.Parallel()

	type bundle struct {
		*testBundle
		content []byte
		info    artifactstore.Info
	}
	setupStored := func(t *testing.T) *bundle {
		t.Helper()
		b := setup(t)
		content := randomBytes(t, 2*artifactstore.ChunkSize+123)
		info, err := b.store.Put(context.Background(), bytes.NewReader(content), "test")
		require.NoError(t, err)
		return &bundle{testBundle: b, content: content, info: info}
	}
	requireGood := func(t *testing.T, b *bundle, path string) {
		t.Helper()
		require.Equal(t, filepath.Join(b.store.CacheDir, strings.TrimPrefix(b.info.Digest, "sha256:")), path)
		fi, err := os.Lstat(path)
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular())
		require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
		require.Equal(t, b.info.Digest, fileDigest(t, path))
	}

	t.Run("WritesAnExecutableVerifiedFile", func(t *testing.T) {
		t.Parallel()
		b := setupStored(t)
		ctx := context.Background()
		path, err := b.store.Materialize(ctx, "web@"+b.info.Digest)
		require.NoError(t, err)
		requireGood(t, b, path)

		// A verified file is served from the cache, without the database.
		b.pool.Close()
		again, err := b.store.Materialize(ctx, b.info.Digest)
		require.NoError(t, err)
		require.Equal(t, path, again)
	})

	t.Run("CreatesAMissingCacheDir", func(t *testing.T) {
		t.Parallel()
		b := setupStored(t)
		b.store.CacheDir = filepath.Join(b.store.CacheDir, "a", "b")
		path, err := b.store.Materialize(context.Background(), b.info.Digest)
		require.NoError(t, err)
		requireGood(t, b, path)
	})

	t.Run("RepairsACorruptedCacheFile", func(t *testing.T) {
		t.Parallel()
		b := setupStored(t)
		ctx := context.Background()
		path, err := b.store.Materialize(ctx, b.info.Digest)
		require.NoError(t, err)

		// Flip one byte in place, as a disk or a careless hand might.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		one := make([]byte, 1)
		_, err = f.ReadAt(one, artifactstore.ChunkSize+7)
		require.NoError(t, err)
		one[0] ^= 0x40
		_, err = f.WriteAt(one, artifactstore.ChunkSize+7)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.NotEqual(t, b.info.Digest, fileDigest(t, path))

		again, err := b.store.Materialize(ctx, b.info.Digest)
		require.NoError(t, err)
		requireGood(t, b, again)
	})

	t.Run("RepairsATruncatedMissingOrReplacedCacheFile", func(t *testing.T) {
		t.Parallel()
		b := setupStored(t)
		ctx := context.Background()
		path, err := b.store.Materialize(ctx, b.info.Digest)
		require.NoError(t, err)

		require.NoError(t, os.Truncate(path, 100))
		path, err = b.store.Materialize(ctx, b.info.Digest)
		require.NoError(t, err)
		requireGood(t, b, path)

		require.NoError(t, os.Remove(path))
		path, err = b.store.Materialize(ctx, b.info.Digest)
		require.NoError(t, err)
		requireGood(t, b, path)

		// A symlink to a file with the right bytes is still replaced: only
		// a regular file in the cache is trusted.
		other := filepath.Join(t.TempDir(), "elsewhere")
		require.NoError(t, os.WriteFile(other, b.content, 0o755))
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.Symlink(other, path))
		path, err = b.store.Materialize(ctx, b.info.Digest)
		require.NoError(t, err)
		requireGood(t, b, path)
	})

	t.Run("RestoresTheExecutableMode", func(t *testing.T) {
		t.Parallel()
		b := setupStored(t)
		ctx := context.Background()
		path, err := b.store.Materialize(ctx, b.info.Digest)
		require.NoError(t, err)
		require.NoError(t, os.Chmod(path, 0o600))
		path, err = b.store.Materialize(ctx, b.info.Digest)
		require.NoError(t, err)
		requireGood(t, b, path)
	})

	t.Run("ConcurrentCallersLeaveOneCorrectFile", func(t *testing.T) {
		t.Parallel()
		b := setupStored(t)
		ctx := context.Background()

		var wg sync.WaitGroup
		paths := make([]string, 10)
		matErrs := make([]error, 10)
		for i := range 10 {
			wg.Go(func() { paths[i], matErrs[i] = b.store.Materialize(ctx, b.info.Digest) })
		}
		wg.Wait()
		for i := range 10 {
			require.NoError(t, matErrs[i])
			requireGood(t, b, paths[i])
		}
		entries, err := os.ReadDir(b.store.CacheDir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary files are left behind")
	})
}
