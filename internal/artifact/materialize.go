package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Cache keeps verified executable copies of artifacts in Dir, fetched
// through Fetch: the store's own for a control plane, the API for a node's
// agent. Materialize verifies the bytes whatever Fetch is.
type Cache struct {
	Dir   string
	Fetch func(ctx context.Context, digest string) (io.ReadCloser, error)
}

// Open reads the artifact's verified copy, fetching it first when needed.
func (c *Cache) Open(ctx context.Context, digest string) (io.ReadCloser, error) {
	path, err := c.Materialize(ctx, digest)
	if err != nil {
		return nil, err
	}
	return os.Open(path)
}

// Materialize is Store.Materialize for any Fetch.
func (c *Cache) Materialize(ctx context.Context, digest string) (string, error) {
	d, err := ParseDigest(digest)
	if err != nil {
		return "", err
	}
	if c.Dir == "" {
		return "", errors.New("materialize artifact: the store has no cache directory")
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", fmt.Errorf("artifact cache dir: %w", err)
	}
	hexDigest := strings.TrimPrefix(d, "sha256:")
	path := filepath.Join(c.Dir, hexDigest)

	ok, err := verifyCached(path, d)
	if err != nil {
		return "", err
	}
	if ok {
		return path, nil
	}
	if err := c.fetch(ctx, d, path); err != nil {
		return "", err
	}
	return path, nil
}

// verifyCached reports whether path is a regular file whose SHA-256 is
// digest, making it executable if it is not. It removes a path that is no
// regular file (a symlink, an empty directory), so the fetch can take its place.
func verifyCached(path, digest string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat cached artifact: %w", err)
	}
	if !fi.Mode().IsRegular() {
		if err := os.Remove(path); err != nil {
			return false, fmt.Errorf("remove %s, which is no regular file: %w", path, err)
		}
		return false, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open cached artifact: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, fmt.Errorf("hash cached artifact: %w", err)
	}
	if "sha256:"+hex.EncodeToString(h.Sum(nil)) != digest {
		return false, nil
	}
	if fi.Mode().Perm() != 0o755 {
		if err := f.Chmod(0o755); err != nil {
			return false, fmt.Errorf("make cached artifact executable: %w", err)
		}
	}
	return true, nil
}

// fetch writes the artifact to path through a synced temporary file and a
// rename, hashing the bytes as they come: what does not match the digest
// never takes the final name.
func (c *Cache) fetch(ctx context.Context, digest, path string) (err error) {
	rc, err := c.Fetch(ctx, digest)
	if err != nil {
		return err
	}
	defer rc.Close()

	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("materialize artifact: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), rc); err != nil {
		return fmt.Errorf("materialize artifact %s: %w", digest, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return fmt.Errorf("materialize artifact %s: the bytes fetched hash to %s", digest, got)
	}
	if err := tmp.Chmod(0o755); err != nil {
		return fmt.Errorf("materialize artifact: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("materialize artifact: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("materialize artifact: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("materialize artifact: %w", err)
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
