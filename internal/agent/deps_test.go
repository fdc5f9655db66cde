package agent

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// forbidden are the packages an agent must never link: a database, the
// journal, sync, the sources and their Git credentials, sealed secrets,
// River. Each forbids the packages under it too.
var forbidden = []string{
	"sluice/db",
	"sluice/queries",
	"sluice/internal/journal",
	"sluice/internal/gitops",
	"sluice/internal/source",
	"sluice/internal/secretbox",
	"github.com/jackc/pgx",
	"github.com/riverqueue",
	"riverqueue.com",
}

func isForbidden(pkg string) bool {
	for _, f := range forbidden {
		if pkg == f || strings.HasPrefix(pkg, f+"/") {
			return true
		}
	}
	return false
}

// TestImports fails when package agent imports, directly or through any
// other package, one that reaches a database, the journal, sync, sealed
// secrets or River (see the package doc). It asks the go command for the
// package's whole dependency graph, as Tailscale's depchecker does, and
// names the path by which each forbidden package comes in.
func TestImports(t *testing.T) {
	t.Parallel()

	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "sluice/internal/agent").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	require.Contains(t, imports, "sluice/internal/hoststep", "the graph must hold what the agent does import")

	// Breadth first from the agent: the first path found to a package is
	// a shortest one.
	via := map[string]string{"sluice/internal/agent": ""}
	queue := []string{"sluice/internal/agent"}
	var bad []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, d := range imports[p] {
			if _, seen := via[d]; seen {
				continue
			}
			via[d] = p
			if isForbidden(d) {
				path := []string{d}
				for q := p; q != ""; q = via[q] {
					path = append([]string{q}, path...)
				}
				bad = append(bad, strings.Join(path, " → "))
				continue
			}
			queue = append(queue, d)
		}
	}
	require.Empty(t, bad, "package agent must not reach these (see its package doc); move what the agent needs from them into a package of its own")
}
