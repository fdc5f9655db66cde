package pglocal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNoBinaries is returned, possibly wrapped, by Start when initdb, pg_ctl or
// postgres cannot be found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (looked for pg_ctl on PATH and in /usr/lib/postgresql/*/bin); install them with `apt-get install postgresql`")

var requiredBinaries = []string{"initdb", "pg_ctl", "postgres"}

// debianBinGlob matches the bin directory of every server version Debian installs.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// findBinDir picks the directory holding initdb, pg_ctl and postgres.
func findBinDir(explicit, dataDir string) (string, error) {
	if explicit != "" {
		dir, err := filepath.Abs(explicit)
		if err != nil {
			return "", fmt.Errorf("resolve bin dir: %w", err)
		}
		if missing := missingBinaries(dir); missing != "" {
			return "", fmt.Errorf("bin dir %s has no %s: %w", dir, missing, ErrNoBinaries)
		}
		return dir, nil
	}
	var candidates []string
	// Prefer the version that initialized the data dir, so that installing a
	// newer major version does not break an existing cluster.
	if v, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		candidates = append(candidates, filepath.Join("/usr/lib/postgresql", strings.TrimSpace(string(v)), "bin"))
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	debian, _ := filepath.Glob(debianBinGlob)
	slices.SortFunc(debian, func(a, b string) int { return slices.Compare(versionOf(b), versionOf(a)) })
	candidates = append(candidates, debian...)
	for _, dir := range candidates {
		if missingBinaries(dir) == "" {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func missingBinaries(dir string) string {
	for _, name := range requiredBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return name
		}
	}
	return ""
}

// versionOf returns the numeric components of the version directory in
// /usr/lib/postgresql/<version>/bin.
func versionOf(binDir string) []int {
	var v []int
	for _, part := range strings.Split(filepath.Base(filepath.Dir(binDir)), ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			n = -1
		}
		v = append(v, n)
	}
	return v
}
