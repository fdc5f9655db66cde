package container

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/moby/moby/client"

	"sluice/internal/hoststep"
)

// maxArchiveEntry bounds one file of an archive as it is unpacked: larger
// than any layer sluice's store takes.
const maxArchiveEntry = 1 << 30

// loadArchive returns the id of the image of the OCI archive at path (the
// artifact the pin names, which the host fetched and verified against its
// digest), loading the archive into the engine when the engine lacks that
// image. The id is the image's config digest as the archive's own index
// and manifest give it, read with go-containerregistry; the engine must
// give the loaded image the same.
func (r *Runtime) loadArchive(ctx context.Context, s *Spec, path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("image %s of %s is an OCI archive in sluice's store, and no verified copy of it was handed over", hoststep.Short(s.Digest), s.Service)
	}
	want, err := archiveImage(path)
	if err != nil {
		return "", fmt.Errorf("the OCI archive %s of %s: %w", hoststep.Short(s.Digest), s.Service, err)
	}
	cli, err := r.client()
	if err != nil {
		return "", err
	}
	if img, err := cli.ImageInspect(ctx, want); err == nil && img.ID == want {
		return want, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	res, err := cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		return "", fmt.Errorf("load the OCI archive %s of %s: %w", hoststep.Short(s.Digest), s.Service, err)
	}
	_, _ = io.Copy(io.Discard, res)
	res.Close()
	img, err := cli.ImageInspect(ctx, want)
	if err != nil || img.ID != want {
		return "", fmt.Errorf("the engine loaded the OCI archive %s of %s, but holds no image %s, which the archive's manifest names: %v", hoststep.Short(s.Digest), s.Service, shortID(want), err)
	}
	return want, nil
}

// archiveImage reads the OCI archive (an OCI image layout in a tar) at path
// and returns the config digest of the one image it holds.
func archiveImage(path string) (string, error) {
	dir, err := os.MkdirTemp("", "sluice-oci-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := untar(path, dir); err != nil {
		return "", err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", fmt.Errorf("it is not an OCI image layout (podman save --format oci-archive, or docker save of an OCI image): %w", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(m.Manifests) != 1 {
		return "", fmt.Errorf("it holds %d images; an archive for one service holds one", len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return "", err
	}
	cfg, err := img.ConfigName()
	if err != nil {
		return "", err
	}
	return cfg.String(), nil
}

// untar unpacks the regular files and directories of the tar at path into
// dir, refusing a name that leaves it.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("it is not a tar archive: %w", err)
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("it names %q, outside the archive", h.Name)
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if h.Size > maxArchiveEntry {
				return fmt.Errorf("its file %s is %d bytes, more than %d", h.Name, h.Size, maxArchiveEntry)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, io.LimitReader(tr, h.Size))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
