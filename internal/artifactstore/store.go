// Package artifactstore is the control plane's artifact store: artifacts
// (package artifact) kept in PostgreSQL.
//
// An artifact lives in the database in 1 MiB chunks, so a worker on any host
// can fetch it, and Materialize keeps a verified, executable copy in a local
// cache directory (an artifact.Cache) for the runtime to start. Agents never
// reach it: they fetch what their tasks name over the API.
//
// Artifacts are immutable: putting the same bytes again is a no-op, and every
// read checks the bytes against the digest.
package artifactstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/db"
	"sluice/internal/artifact"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

// ChunkSize is the length of every stored chunk but an artifact's last.
const ChunkSize = 1 << 20

// DefaultMaxSize is the largest artifact Put accepts when Store.MaxSize is 0.
const DefaultMaxSize int64 = 512 << 20

// Store keeps artifacts in PostgreSQL and materializes them on local disk.
type Store struct {
	// Pool reaches the database that holds the artifact and artifact_chunk
	// tables (migration 0003).
	Pool *pgxpool.Pool
	// CacheDir is where Materialize keeps executable copies, one file per
	// digest named by its hex. It is created when missing. Put also stages
	// uploads here when set (else in os.TempDir()).
	CacheDir string
	// MaxSize is the largest artifact Put accepts, in bytes; 0 means
	// DefaultMaxSize.
	MaxSize int64
	// Journal records each upload that stores new bytes as a receipt, in
	// the transaction that stores them. Required by Put.
	Journal *journal.Journal
}

// ActionPut is the action of an upload's receipt.
const ActionPut = "put_artifact"

// Info describes a stored artifact.
type Info struct {
	Digest    string // "sha256:<64 lowercase hex>"
	Size      int64  // bytes
	CreatedAt time.Time
	// JournalID is the receipt of the upload that stored the bytes; zero
	// when they were stored before (or when read).
	JournalID uuid.UUID
}

// List returns up to limit stored artifacts, newest first, after the one
// after names (the last of the previous page) when it is not nil.
func (s *Store) List(ctx context.Context, after *Info, limit int) ([]Info, error) {
	p := &db.ArtifactListParams{Lim: int32(limit)}
	if after != nil {
		p.AfterAt, p.AfterDigest = &after.CreatedAt, &after.Digest
	}
	rows, err := db.New(s.Pool).ArtifactList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	out := make([]Info, len(rows))
	for i, r := range rows {
		out[i] = Info{Digest: r.Digest, Size: r.Size, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

func (s *Store) maxSize() int64 {
	if s.MaxSize > 0 {
		return s.MaxSize
	}
	return DefaultMaxSize
}

// Put stores the bytes of r and returns their digest and size. Putting bytes
// that are already stored succeeds and changes nothing, also when several
// callers put them at once.
//
// Put first copies r to a temporary file while hashing it, because the digest
// is known only at the end and a transaction must not stay open while a slow
// client uploads. It then writes the artifact row and its chunks in one short
// transaction, reading the file back a chunk at a time, so memory stays at
// about one chunk whatever the size. A body larger than MaxSize, or an
// empty one, is refused with errs.Invalid. by is who uploads: the receipt
// of bytes stored for the first time names them.
func (s *Store) Put(ctx context.Context, r io.Reader, by string) (Info, error) {
	if s.Journal == nil {
		return Info{}, errors.New("store artifact: the store has no journal to record the upload in")
	}
	if s.CacheDir != "" {
		if err := os.MkdirAll(s.CacheDir, 0o755); err != nil {
			return Info{}, fmt.Errorf("artifact cache dir: %w", err)
		}
	}
	tmp, err := os.CreateTemp(s.CacheDir, ".put-*")
	if err != nil {
		return Info{}, fmt.Errorf("stage artifact: %w", err)
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()

	limit := s.maxSize()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, limit+1))
	if err != nil {
		return Info{}, fmt.Errorf("stage artifact: %w", err)
	}
	if n > limit {
		return Info{}, errs.Errorf(errs.Invalid, "The artifact is larger than the limit of %d bytes; build a smaller executable or raise the limit.", limit)
	}
	if n == 0 {
		return Info{}, errs.Errorf(errs.Invalid, "The artifact is empty: send the executable's bytes as the request body; nothing was stored.")
	}
	info := Info{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: n}

	// A quick look outside the transaction saves re-reading a large file
	// that is already stored; ArtifactInsert below is what decides.
	if stored, err := s.Stat(ctx, info.Digest); err == nil {
		return stored, nil
	} else if !errs.Is(err, errs.NotFound) {
		return Info{}, err
	}

	theirs := false
	err = db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		row, err := q.ArtifactInsert(ctx, &db.ArtifactInsertParams{Digest: info.Digest, Size: info.Size})
		if errors.Is(err, pgx.ErrNoRows) {
			theirs = true // stored by someone else meanwhile; their chunks are whole
			return nil
		}
		if err != nil {
			return fmt.Errorf("insert artifact: %w", err)
		}
		info.CreatedAt = row.CreatedAt
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("rewind staged artifact: %w", err)
		}
		// Hash again what is written, so a staged file changed on disk
		// under us cannot be stored under the wrong digest.
		check := sha256.New()
		buf := make([]byte, ChunkSize)
		for seq := int32(0); ; seq++ {
			k, err := io.ReadFull(tmp, buf)
			if k > 0 {
				check.Write(buf[:k])
				if err := q.ArtifactChunkInsert(ctx, &db.ArtifactChunkInsertParams{Digest: info.Digest, Seq: seq, Data: buf[:k]}); err != nil {
					return fmt.Errorf("insert artifact chunk %d: %w", seq, err)
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				return fmt.Errorf("read staged artifact: %w", err)
			}
		}
		if got := "sha256:" + hex.EncodeToString(check.Sum(nil)); got != info.Digest {
			return fmt.Errorf("staged artifact changed while it was stored: %s, then %s", info.Digest, got)
		}
		run, err := s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionPut, Target: info.Digest, RequestedBy: by, Result: &PutResult{Digest: info.Digest, Size: info.Size},
			Message: fmt.Sprintf("artifact %s (%d bytes) stored, uploaded by %s", info.Digest, info.Size, by),
		})
		if err != nil {
			return err
		}
		info.JournalID = run.ID
		return nil
	})
	if err != nil {
		return Info{}, err
	}
	if theirs {
		return s.Stat(ctx, info.Digest)
	}
	return info, nil
}

// Stat returns what is stored under digest (any form ParseDigest accepts):
// errs.NotFound when nothing is, errs.Invalid when digest is malformed.
func (s *Store) Stat(ctx context.Context, digest string) (Info, error) {
	d, err := artifact.ParseDigest(digest)
	if err != nil {
		return Info{}, err
	}
	a, err := db.New(s.Pool).ArtifactGet(ctx, d)
	if errors.Is(err, pgx.ErrNoRows) {
		return Info{}, errs.Errorf(errs.NotFound, "No artifact %s is stored; upload it first.", d)
	}
	if err != nil {
		return Info{}, fmt.Errorf("get artifact %s: %w", d, err)
	}
	return Info{Digest: a.Digest, Size: a.Size, CreatedAt: a.CreatedAt}, nil
}

// Open returns a reader of the artifact's bytes. It fetches one chunk at a
// time, in order, as the caller reads; at the end it fails with an error
// (and never io.EOF) unless the bytes match the size and digest. Errors are
// those of Stat. The reader uses ctx for every fetch.
func (s *Store) Open(ctx context.Context, digest string) (io.ReadCloser, error) {
	info, err := s.Stat(ctx, digest)
	if err != nil {
		return nil, err
	}
	return &reader{ctx: ctx, q: db.New(s.Pool), info: info, h: sha256.New()}, nil
}

// reader streams an artifact's chunks. Each fetch is a query of its own, not
// one transaction or cursor, so a slow reader holds no connection between
// reads; stored artifacts never change, so the chunks still fit together.
type reader struct {
	ctx  context.Context
	q    *db.Queries
	info Info
	h    hash.Hash
	seq  int32
	buf  []byte // the rest of the current chunk
	read int64
	err  error // sticky: io.EOF at a verified end, or the failure
}

func (r *reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(r.buf) == 0 && r.err == nil {
		r.fetch()
	}
	if len(r.buf) == 0 {
		return 0, r.err
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// fetch loads the next chunk into buf, or sets err at the end.
func (r *reader) fetch() {
	if r.read >= r.info.Size {
		if got := "sha256:" + hex.EncodeToString(r.h.Sum(nil)); r.read != r.info.Size || got != r.info.Digest {
			r.err = fmt.Errorf("artifact %s is corrupt: read %d bytes hashing to %s", r.info.Digest, r.read, got)
			return
		}
		r.err = io.EOF
		return
	}
	data, err := r.q.ArtifactChunkGet(r.ctx, &db.ArtifactChunkGetParams{Digest: r.info.Digest, Seq: r.seq})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		r.err = fmt.Errorf("artifact %s is missing chunk %d", r.info.Digest, r.seq)
	case err != nil:
		r.err = fmt.Errorf("read artifact %s chunk %d: %w", r.info.Digest, r.seq, err)
	case len(data) == 0 || r.read+int64(len(data)) > r.info.Size:
		r.err = fmt.Errorf("artifact %s is corrupt: chunk %d does not fit its size %d", r.info.Digest, r.seq, r.info.Size)
	default:
		r.h.Write(data)
		r.read += int64(len(data))
		r.seq++
		r.buf = data
	}
}

func (r *reader) Close() error {
	if r.err == nil {
		r.err = errors.New("artifact reader is closed")
	}
	r.buf = nil
	return nil
}

// Materialize returns the path of an executable (0755) copy of the artifact
// in CacheDir, named by the digest's hex, whose bytes it has just verified
// against the digest.
//
// It hashes the cached file on every call, since the runtime verifies an
// executable before every start, and fetches the artifact again when the file
// is missing, is not a regular file, or does not match (corrupted on disk).
// A verified cached file is answered without asking the database.
//
// A fetch writes a temporary file in CacheDir, syncs it and renames it into
// place, so neither a crash nor concurrent callers leave a partial file under
// the final name; concurrent callers may each fetch, and each rename puts
// whole, verified bytes in place. A crash can leave a ".<hex>.tmp-*" file
// behind, which nothing reads. Errors are those of Stat for an artifact that
// must be fetched.
func (s *Store) Materialize(ctx context.Context, digest string) (string, error) {
	return (&artifact.Cache{Dir: s.CacheDir, Fetch: s.Open}).Materialize(ctx, digest)
}
