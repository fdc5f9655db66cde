package infra

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sluice/internal/terraform"
)

// initMarker, in a root's .terraform, holds the rootHash that root was last
// initialized for. Init costs more than a plan (it runs terraform twice), and
// a drift check of an unchanged unit plans the same root every time.
const initMarker = ".terraform/sluice-init"

// rootHash sums what terraform init depends on: the terraform binary (path,
// size, time), main.tf.json, and the module's files (path, mode, bytes).
func rootHash(r *terraform.Runner, dir string) (string, error) {
	h := sha256.New()
	bin, err := os.Stat(r.Bin)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "bin %s %d %d\n", r.Bin, bin.Size(), bin.ModTime().UnixNano())
	add := func(path string) error {
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(h, "file %s %o %d\n", filepath.ToSlash(rel), fi.Mode().Perm(), len(b))
		h.Write(b)
		return nil
	}
	if err := add(filepath.Join(dir, terraform.RootFile)); err != nil {
		return "", err
	}
	err = filepath.WalkDir(filepath.Join(dir, "module"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return add(path)
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// initialized reports whether dir was initialized for hash.
func initialized(dir, hash string) bool {
	b, err := os.ReadFile(filepath.Join(dir, initMarker))
	return err == nil && string(b) == hash
}

// markInitialized records that dir was initialized for hash; forget drops
// the record, so that the next operation initializes again (after a failed
// plan, whose cause may be the initialization).
func markInitialized(dir, hash string) error {
	return os.WriteFile(filepath.Join(dir, initMarker), []byte(hash), 0o644)
}

func forgetInit(dir string) { _ = os.Remove(filepath.Join(dir, initMarker)) }
