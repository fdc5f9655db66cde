package gitsync

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
)

// network is an infrastructure repository: a module with a nested file and
// an executable script, and a unit that uses it.
var network = map[string]string{
	"infrastructure/modules/network/main.tf":        `resource "terraform_data" "vpc" { input = var.cidr }`,
	"infrastructure/modules/network/vars/cidr.tf":   `variable "cidr" { type = string }`,
	"infrastructure/modules/network/scripts/run.sh": "#!/bin/sh\necho v1\n",
	"infrastructure/units/network.json":             `{"kind":"Infrastructure","metadata":{"name":"network"}}`,
	"apps/web.json":                                 `{"kind":"Service","metadata":{"name":"web"}}`,
}

// readTree returns every file under dir (slash paths → content) and the
// executable ones.
func readTree(t *testing.T, dir string) (files map[string]string, executable map[string]bool) {
	t.Helper()
	files, executable = map[string]string{}, map[string]bool{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		require.NoError(t, err)
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		files[filepath.ToSlash(rel)] = string(data)
		fi, err := d.Info()
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular(), "%s is not a regular file", rel)
		if fi.Mode()&0o111 != 0 {
			executable[filepath.ToSlash(rel)] = true
		}
		return nil
	}))
	return files, executable
}

// under returns the files of repo below dir, relative to it.
func under(repo map[string]string, dir string) map[string]string {
	out := map[string]string{}
	for p, content := range repo {
		if rest, ok := strings.CutPrefix(p, dir+"/"); ok {
			out[rest] = content
		}
	}
	return out
}

func TestExport(t *testing.T) {
	t.Parallel()

	const module = "infrastructure/modules/network"

	// setupExport pushes network with scripts/run.sh executable, syncs, then
	// moves the branch on (c2 edits, deletes and adds module files) and syncs
	// again.
	setupExport := func(t *testing.T) (b *testBundle, m *Mirror, c1, c2 string) {
		t.Helper()
		b = setup(t)
		for p, content := range network {
			full := filepath.Join(b.pusher, filepath.FromSlash(p))
			require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
			require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
		}
		require.NoError(t, os.Chmod(filepath.Join(b.pusher, module, "scripts/run.sh"), 0o755))
		c1 = b.commit(t, "one", nil)
		m = b.mirror(t, Remote{})
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		c2 = b.commit(t, "two", map[string]string{
			module + "/main.tf":     `resource "terraform_data" "vpc" { input = "v2" }`,
			module + "/outputs.tf":  `output "id" { value = terraform_data.vpc.id }`,
			"apps/web.json":         `{}`,
			"infrastructure/new.tf": `# new`,
		}, module+"/vars/cidr.tf")
		_, err = m.Sync(b.ctx, c1)
		require.NoError(t, err)
		return b, m, c1, c2
	}

	t.Run("WritesTheDirectoryAsAnOlderCommitHeldIt", func(t *testing.T) {
		t.Parallel()
		b, m, c1, c2 := setupExport(t)
		dest := filepath.Join(t.TempDir(), "exports", "network")

		require.NoError(t, m.Export(b.ctx, c1, module, dest))
		files, executable := readTree(t, dest)
		require.Equal(t, under(network, module), files)
		require.Equal(t, map[string]bool{"scripts/run.sh": true}, executable)

		// The working tree still holds c2, as the git CLI sees it.
		b.requireCleanCheckout(t, c2)
		require.Equal(t, `resource "terraform_data" "vpc" { input = "v2" }`, b.read(t, module+"/main.tf"))
		b.requireMissing(t, module+"/vars/cidr.tf")
	})

	t.Run("ReplacesWhatDestHeld", func(t *testing.T) {
		t.Parallel()
		b, m, c1, c2 := setupExport(t)
		dest := filepath.Join(t.TempDir(), "network")
		require.NoError(t, m.Export(b.ctx, c1, module+"/", dest))
		require.NoError(t, os.WriteFile(filepath.Join(dest, "stray.tf"), []byte("x"), 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(dest, ".terraform", "modules"), 0o755))

		require.NoError(t, m.Export(b.ctx, c2, module, dest))
		files, _ := readTree(t, dest)
		require.Equal(t, map[string]string{
			"main.tf":        `resource "terraform_data" "vpc" { input = "v2" }`,
			"outputs.tf":     `output "id" { value = terraform_data.vpc.id }`,
			"scripts/run.sh": "#!/bin/sh\necho v1\n",
		}, files)
		_, err := os.Stat(filepath.Join(dest, ".terraform"))
		require.ErrorIs(t, err, fs.ErrNotExist)
		entries, err := os.ReadDir(filepath.Dir(dest))
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary directory is left beside dest")
	})

	t.Run("ExportsTheWholeTree", func(t *testing.T) {
		t.Parallel()
		b, m, c1, _ := setupExport(t)
		for _, dir := range []string{"", "."} {
			dest := filepath.Join(t.TempDir(), "all")
			require.NoError(t, m.Export(b.ctx, c1, dir, dest))
			files, _ := readTree(t, dest)
			require.Equal(t, network, files, "no .git, no untracked files")
		}
	})

	t.Run("MissingDirIsNotFound", func(t *testing.T) {
		t.Parallel()
		b, m, c1, c2 := setupExport(t)
		dest := filepath.Join(t.TempDir(), "network")
		require.NoError(t, os.MkdirAll(dest, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dest, "keep.tf"), []byte("x"), 0o644))

		err := m.Export(b.ctx, c1, "infrastructure/modules/storage", dest)
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		require.Contains(t, err.Error(), `"infrastructure/modules/storage"`)
		require.Contains(t, err.Error(), c1)

		// Present at c2 only.
		err = m.Export(b.ctx, c1, module+"/outputs.tf", dest)
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		require.NoError(t, m.Export(b.ctx, c2, "infrastructure", filepath.Join(t.TempDir(), "infra")))
		err = m.Export(b.ctx, c1, module+"/vars/cidr.tf", dest)
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		require.Contains(t, err.Error(), "is a file")

		files, _ := readTree(t, dest)
		require.Equal(t, map[string]string{"keep.tf": "x"}, files, "a failed export leaves dest alone")
	})

	t.Run("UnknownCommitIsNotFoundAndAMalformedOneInvalid", func(t *testing.T) {
		t.Parallel()
		b, m, _, _ := setupExport(t)
		dest := filepath.Join(t.TempDir(), "x")
		err := m.Export(b.ctx, strings.Repeat("ab", 20), module, dest)
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		require.Contains(t, err.Error(), "sync first")
		for _, commit := range []string{"main", "HEAD", "abc123", ""} {
			err := m.Export(b.ctx, commit, module, dest)
			require.True(t, errs.Is(err, errs.Invalid), "%q: %v", commit, err)
		}
		require.NoDirExists(t, dest)
	})

	t.Run("PathsLeavingTheTreeAreRefused", func(t *testing.T) {
		t.Parallel()
		b, m, c1, _ := setupExport(t)
		dest := filepath.Join(t.TempDir(), "x")
		for _, dir := range []string{"../x", "..", "/etc", "infrastructure/../../x", "infrastructure/./modules", ".git", "a//b"} {
			err := m.Export(b.ctx, c1, dir, dest)
			require.True(t, errs.Is(err, errs.Invalid), "%q: %v", dir, err)
		}
		require.NoDirExists(t, dest)
	})

	t.Run("DestOverlappingTheWorkingTreeIsRefused", func(t *testing.T) {
		t.Parallel()
		b, m, c1, c2 := setupExport(t)
		for _, dest := range []string{b.dir, filepath.Join(b.dir, "export"), filepath.Join(b.dir, ".git", "x"), filepath.Dir(b.dir), "/", "",
			filepath.Join(b.dir, "archive"), filepath.Join(b.dir, "archive", "..", "x")} {
			err := m.Export(b.ctx, c1, module, dest)
			require.True(t, errs.Is(err, errs.Invalid), "%q: %v", dest, err)
		}
		b.requireCleanCheckout(t, c2)
		require.NoDirExists(t, filepath.Join(b.dir, "export"))
	})

	t.Run("BelowTheArchiveIsAllowed", func(t *testing.T) {
		t.Parallel()
		b, m, c1, c2 := setupExport(t)
		dest := filepath.Join(b.dir, "archive", "infra", "net", "module")
		require.NoError(t, m.Export(b.ctx, c1, module, dest))
		require.FileExists(t, filepath.Join(dest, "main.tf"))
		// Untracked, so the checkout still reads clean and the next sync
		// leaves it alone.
		b.requireCleanCheckout(t, c2)
		_, err := m.Sync(b.ctx, c2)
		require.NoError(t, err)
		require.FileExists(t, filepath.Join(dest, "main.tf"))
	})

	t.Run("SymlinksAndSubmodulesAreRefused", func(t *testing.T) {
		t.Parallel()
		b, m, _, c2 := setupExport(t)
		require.NoError(t, os.Symlink("main.tf", filepath.Join(b.pusher, module, "link.tf")))
		c3 := b.commit(t, "a link", nil)
		// A gitlink straight into the index: b.commit's add -A would drop it.
		gitCmd(t, b.pusher, "update-index", "--add", "--cacheinfo", "160000,"+c2+",infrastructure/modules/vendored/sub")
		gitCmd(t, b.pusher, "commit", "-q", "-m", "a submodule")
		gitCmd(t, b.pusher, "push", "-q", "origin", "HEAD")
		c4 := gitCmd(t, b.pusher, "rev-parse", "HEAD")
		_, err := m.Sync(b.ctx, "")
		require.NoError(t, err)
		dest := filepath.Join(t.TempDir(), "x")

		err = m.Export(b.ctx, c3, module, dest)
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		require.Contains(t, err.Error(), "link.tf")
		require.Contains(t, err.Error(), "symbolic link")

		err = m.Export(b.ctx, c4, "infrastructure/modules/vendored", dest)
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		require.Contains(t, err.Error(), "submodule")
		require.NoDirExists(t, dest)

		// A sibling directory without them exports.
		require.NoError(t, m.Export(b.ctx, c4, "apps", dest))
	})

	t.Run("NeverSyncedIsNotFoundAndCreatesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1 := b.commit(t, "one", network)
		m := b.mirror(t, Remote{})
		err := m.Export(b.ctx, c1, module, filepath.Join(t.TempDir(), "x"))
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
		require.NoDirExists(t, b.dir)
	})

	t.Run("WaitsForTheSyncLock", func(t *testing.T) {
		t.Parallel()
		b, m, c1, _ := setupExport(t)
		unlock, err := lockFile(b.ctx, filepath.Join(b.dir, ".git", lockName)) // as another process's Sync
		require.NoError(t, err)
		dest := filepath.Join(t.TempDir(), "x")
		ctx, cancel := context.WithTimeout(b.ctx, 200*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, m.Export(ctx, c1, module, dest), context.DeadlineExceeded)
		require.NoDirExists(t, dest)

		unlock()
		require.NoError(t, m.Export(b.ctx, c1, module, dest))
	})

	t.Run("CancelledContextStopsIt", func(t *testing.T) {
		t.Parallel()
		b, m, c1, _ := setupExport(t)
		ctx, cancel := context.WithCancel(b.ctx)
		cancel()
		dest := filepath.Join(t.TempDir(), "x")
		require.Error(t, m.Export(ctx, c1, module, dest))
		require.NoDirExists(t, dest)
	})
}
