package gitops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gitsync"
	"sluice/internal/source"
)

// WorkTree is the working tree src's repository is mirrored into: the
// config root for the default source, SourcesDir/<id> for any other.
func (s *Service) WorkTree(src *db.Source) string { return s.WorkTreeOf(src.ID) }

// WorkTreeOf is WorkTree by source id.
func (s *Service) WorkTreeOf(sourceID uuid.UUID) string {
	if sourceID == source.DefaultID {
		return s.ConfigRoot
	}
	return filepath.Join(s.SourcesDir, sourceID.String())
}

// mirror returns the Mirror of src's repository in its working tree.
func (s *Service) mirror(src *db.Source) (*gitsync.Mirror, error) {
	repoURL, token, err := s.Sources.Remote(src)
	if err != nil {
		return nil, err
	}
	return gitsync.New(gitsync.Opts{
		Dir:      s.WorkTree(src),
		Remote:   gitsync.Remote{URL: repoURL, Branch: src.Branch, Token: token},
		Redactor: s.Redactor,
		Logger:   s.Logger,
		// No synced commit: the repository, branch or path was just set or
		// changed by an operator, so a checkout of the old one gives way.
		AdoptRemote: src.SyncedCommit == nil,
	})
}

// CommitFile commits an edit of one file of the source's repository and
// pushes it to the tracked branch (see gitsync.Mirror.CommitFile). The
// inventory changes with the next sync, which the caller runs.
func (s *Service) CommitFile(ctx context.Context, sourceID uuid.UUID, path string, edit func([]byte) ([]byte, error), message string) (*gitsync.PushResult, error) {
	src, err := db.New(s.Pool).SourceGet(ctx, sourceID)
	if err != nil {
		return nil, fmt.Errorf("load source %s: %w", sourceID, err)
	}
	mirror, err := s.mirror(src)
	if err != nil {
		return nil, err
	}
	return mirror.CommitFile(ctx, path, edit, message, object.Signature{Name: CommitAuthor, Email: CommitEmail})
}

// ExportModule writes directory dir of the source's repository, as it is at
// commit, into dest (see gitsync.Mirror.Export): a Terraform root gets the
// module exactly as the commit it plans holds it.
func (s *Service) ExportModule(ctx context.Context, sourceID uuid.UUID, commit, dir, dest string) error {
	src, err := db.New(s.Pool).SourceGet(ctx, sourceID)
	if err != nil {
		return fmt.Errorf("load source %s: %w", sourceID, err)
	}
	mirror, err := s.mirror(src)
	if err != nil {
		return err
	}
	err = mirror.Export(ctx, commit, dir, dest)
	if !errs.Is(err, errs.NotFound) {
		return err
	}
	// Another process (serve, a worker with a data dir of its own) synced
	// the commit: this process's tree fetches it, and exports again. The
	// inventory is not touched; a commit the branch no longer holds stays
	// NotFound.
	if _, serr := mirror.Sync(ctx, ""); serr != nil {
		return errors.Join(err, serr)
	}
	return mirror.Export(ctx, commit, dir, dest)
}

// ReadFileAt returns the file name of the source's repository as commit
// holds it, and its blob's hash (see gitsync.Mirror.ReadFile): a SOPS file a
// service names, as the commit in force has it. When this process's tree
// lacks the commit (another process synced it), or the file, it fetches
// once and reads again; an action calls it, never a sync, which reads the
// commit it fetched.
func (s *Service) ReadFileAt(ctx context.Context, sourceID uuid.UUID, commit, name string) ([]byte, string, error) {
	src, err := db.New(s.Pool).SourceGet(ctx, sourceID)
	if err != nil {
		return nil, "", fmt.Errorf("load source %s: %w", sourceID, err)
	}
	mirror, err := s.mirror(src)
	if err != nil {
		return nil, "", err
	}
	data, hash, err := mirror.ReadFile(ctx, commit, name)
	if !errs.Is(err, errs.NotFound) {
		return data, hash, err
	}
	if _, serr := mirror.Sync(ctx, ""); serr != nil {
		return nil, "", errors.Join(err, serr)
	}
	return mirror.ReadFile(ctx, commit, name)
}

// The author and committer of the commits sluice pushes.
const (
	CommitAuthor = "sluice"
	CommitEmail  = "sluice@localhost"
)
