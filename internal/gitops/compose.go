package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/gitsync"
	"sluice/internal/runtime/compose"
	"sluice/internal/servicespec"
	"sluice/internal/unit"
)

// A compose unit (a Service of runtime compose, or a Blueprint whose
// template is one) names Compose files and env files in the repository:
// what it runs is its JSON and those files, and the compose runtime
// refuses some projects (compose.Check). The sync reads the project of
// every compose unit it walks at the commit it syncs, and lists a unit
// whose project the runtime would refuse, or whose files the commit lacks,
// as invalid with the sentence: such a unit never enters the inventory as
// valid, to fail at its first action. Since a unit's validity then depends
// on files that are not the unit, an incremental sync walks the compose
// units whose files changed too (composeDependents).

// composeUnit is a compose unit's spec, and where its compose block sits in
// the unit ("spec.compose", or "spec.template.compose" for a Blueprint).
type composeUnit struct {
	spec  *servicespec.Spec
	field string
}

// checkCompose moves the compose units among units whose Compose project
// cannot be read at the synced commit, or which compose.Check refuses, to
// invalid, each with one sentence. It returns at once when the sync walked
// no compose unit. Each file is read once, from the files the sync already
// holds when it can, else from the mirror's object store, never fetching.
// An error that is no fault of the unit (the store cannot be read) fails
// the sync.
func (r *syncRun) checkCompose(ctx context.Context, units []*unit.Unit, invalid []unit.Invalid, composed map[string]composeUnit) ([]*unit.Unit, []unit.Invalid, error) {
	if len(composed) == 0 {
		return units, invalid, nil
	}
	files := &composeFiles{mirror: r.mirror, commit: r.got.Commit, tracked: r.got.Tracked,
		held: make(map[string]*gitsync.File), read: make(map[string]composeRead)}
	for i := range r.got.Files {
		files.held[r.got.Files[i].Path] = &r.got.Files[i]
	}
	for _, c := range r.got.Changed {
		if c.Deleted {
			if files.deleted == nil {
				files.deleted = map[string]bool{}
			}
			files.deleted[c.Path] = true
		}
	}
	kept := units[:0:0]
	for _, u := range units {
		c, ok := composed[u.Path]
		if !ok {
			kept = append(kept, u)
			continue
		}
		why, err := files.check(ctx, u.Name, c)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			invalid = append(invalid, unit.Invalid{Path: u.Path, Reason: why})
			continue
		}
		kept = append(kept, u)
	}
	return kept, invalid, nil
}

// composeFiles reads the files of a sync's compose units at its commit.
type composeFiles struct {
	mirror *gitsync.Mirror
	commit string
	// held are the files the sync read already, by path: its changed files
	// under the source's path, or all of them on a full walk.
	held map[string]*gitsync.File
	// read are the files read from the object store so far, by path.
	read map[string]composeRead
	// tracked is every file of the commit on a full walk (nil otherwise),
	// and deleted the paths the commits deleted: a path known absent is
	// not asked of the store, which reads itself whole for a missing file
	// to tell it from damage.
	tracked, deleted map[string]bool
}

type composeRead struct {
	data []byte
	err  error
}

// file is path's content at the commit.
func (f *composeFiles) file(ctx context.Context, path string) ([]byte, error) {
	if h, ok := f.held[path]; ok && h.Data != nil && h.Mode.IsRegular() {
		return h.Data, nil
	}
	if f.deleted[path] || f.tracked != nil && !f.tracked[path] {
		return nil, errs.Errorf(errs.NotFound, "Commit %s holds no file %s.", short(f.commit), path)
	}
	got, ok := f.read[path]
	if !ok {
		got.data, _, got.err = f.mirror.ReadFile(ctx, f.commit, path)
		f.read[path] = got
	}
	return got.data, got.err
}

// check says why the compose unit called name cannot be accepted, or "".
func (f *composeFiles) check(ctx context.Context, name string, c composeUnit) (string, error) {
	var failed string
	project, err := c.spec.ReadProject(func(path string) ([]byte, error) {
		data, err := f.file(ctx, path)
		if err != nil {
			failed = path
		}
		return data, err
	})
	if err != nil {
		field := c.field + ".files"
		if !slices.Contains(c.spec.Compose.Files, failed) {
			field = c.field + ".envFiles"
		}
		switch errs.CodeOf(err) {
		case errs.NotFound:
			return fmt.Sprintf("has %q in %q, a file commit %s does not hold; commit it, or fix the path", failed, field, short(f.commit)), nil
		case errs.Invalid:
			// A link, a directory or submodule, or a file too large.
			return fmt.Sprintf("has %q in %q, which cannot be read at commit %s: %s", failed, field, short(f.commit), lowerFirst(strings.TrimSuffix(errs.MessageOf(err), "."))), nil
		}
		return "", fmt.Errorf("read the Compose project of %s at commit %s: %w", name, short(f.commit), err)
	}
	if _, err := compose.Check(name, project); err != nil {
		return fmt.Sprintf("has a Compose project that the compose runtime refuses at commit %s: %s", short(f.commit), strings.TrimSuffix(errs.MessageOf(err), ".")), nil
	}
	return "", nil
}

// composeDependents adds to the walk of an incremental sync the compose
// units of the inventory whose Compose or env files the commits changed
// (or deleted), although their own file did not change: their files are
// read from the synced commit into r.got.Files, and their paths join
// plan.changed, so that checkCompose checks them again. A full walk walks
// every unit already. It asks the database nothing when every changed path
// is a unit file the sync reads anyway, as most syncs' are.
func (r *syncRun) composeDependents(ctx context.Context) error {
	plan := r.plan
	if plan.changed == nil || len(r.got.Changed) == 0 {
		return nil
	}
	var touched map[string]bool
	for _, c := range r.got.Changed {
		if strings.HasSuffix(c.Path, ".json") && unit.InPrefix(c.Path, r.src.Path) {
			continue // a unit file, walked as one
		}
		if touched == nil {
			touched = map[string]bool{}
		}
		touched[c.Path] = true
	}
	if len(touched) == 0 {
		return nil
	}
	deps, err := db.New(r.s.Pool).UnitListComposeBySource(ctx, r.src.ID)
	if err != nil {
		return fmt.Errorf("list the compose units of source %s: %w", r.src.Name, err)
	}
	var again []string
	for _, d := range deps {
		if plan.changed[d.Path] || !unit.InPrefix(d.Path, r.src.Path) {
			continue // read already, or no longer under the source's path
		}
		var c servicespec.Compose
		if json.Unmarshal(d.Compose, &c) != nil {
			continue // the spec reads when the unit is walked, or it is not in the inventory
		}
		if slices.ContainsFunc(c.Files, func(p string) bool { return touched[p] }) || slices.ContainsFunc(c.EnvFiles, func(p string) bool { return touched[p] }) {
			again = append(again, d.Path)
		}
	}
	if len(again) == 0 {
		return nil
	}
	slices.Sort(again)
	for _, path := range again {
		data, _, err := r.mirror.ReadFile(ctx, r.got.Commit, path)
		switch {
		case errs.Is(err, errs.NotFound):
			continue // gone: a changed path, walked as one
		case err != nil:
			return fmt.Errorf("read %s at commit %s: %w", path, short(r.got.Commit), err)
		}
		r.got.Files = append(r.got.Files, gitsync.File{Path: path, Mode: 0o644, Size: int64(len(data)), Data: data})
		plan.changed[path] = true
	}
	slices.SortFunc(r.got.Files, func(a, b gitsync.File) int { return strings.Compare(a.Path, b.Path) })
	named := strings.Join(again[:min(len(again), 10)], ", ")
	if len(again) > 10 {
		named += fmt.Sprintf(" and %d more", len(again)-10)
	}
	r.p.Info(ctx, fmt.Sprintf("read again %d compose units whose Compose or env files changed: %s", len(again), named), nil)
	return nil
}
