//go:build !unix

package gitsync

import (
	"context"
	"os"
)

// lockFile creates path but takes no lock: sluice's control plane runs on
// Unix, where lock_unix.go takes an flock. One process per config root is
// then the operator's to ensure.
func lockFile(_ context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}
