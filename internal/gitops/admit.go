package gitops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"sluice/db"
	"sluice/internal/blueprintspec"
	"sluice/internal/errs"
	"sluice/internal/infraspec"
	"sluice/internal/secrets"
	"sluice/internal/servicespec"
	"sluice/internal/unit"
)

// What the inventory admits, of the three kinds of unit that actions act on
// (Service, Infrastructure, Blueprint): a unit whose spec reads as its kind
// (checkSpecs, as the walk reads the files), and one active holder of each
// service and Blueprint name across every source (decideServiceNames, as
// the admission decides in the finishing transaction).

// checkSpecs moves the Service, Infrastructure and Blueprint units whose
// spec does not read as one to invalid, with the reason: the inventory holds
// only units an action can act on, and a container's that asks for a power
// over its host that src does not allow (its containerPowers). It returns the secrets each kept unit
// names, by path, for checkSecretRefs, the specs whose image an engine
// pulls from a registry (a Service's, a Blueprint's template), by path, for
// resolveImages, and the compose units' specs, by path, for checkCompose.
func checkSpecs(src *db.Source, units []*unit.Unit, invalid []unit.Invalid) ([]*unit.Unit, []unit.Invalid, map[string][]secretUse, map[string]*servicespec.Spec, map[string]composeUnit) {
	kept := units[:0:0]
	var uses map[string][]secretUse
	var pulled map[string]*servicespec.Spec
	var composed map[string]composeUnit
	composes := func(path string, spec *servicespec.Spec, field string) {
		if spec.Runtime == servicespec.RuntimeCompose {
			if composed == nil {
				composed = map[string]composeUnit{}
			}
			composed[path] = composeUnit{spec: spec, field: field}
		}
	}
	pull := func(path string, spec *servicespec.Spec) {
		if spec.PullsOneImage() {
			if pulled == nil {
				pulled = map[string]*servicespec.Spec{}
			}
			pulled[path] = spec
		}
	}
	for _, u := range units {
		var err error
		switch u.Kind {
		case servicespec.Kind:
			var spec *servicespec.Spec
			if spec, err = servicespec.Parse(u.Name, u.Content); err == nil {
				err = servicespec.PowersRefused(spec.Powers(), src.ContainerPowers, src.Name)
			}
			if err == nil {
				pull(u.Path, spec)
				composes(u.Path, spec, "spec.compose")
				for _, v := range slices.Sorted(maps.Keys(spec.SecretEnv())) {
					if uses == nil {
						uses = map[string][]secretUse{}
					}
					uses[u.Path] = append(uses[u.Path], secretUse{where: "env " + v, name: spec.SecretEnv()[v]})
				}
				for _, v := range slices.Sorted(maps.Keys(spec.SOPSEnv())) {
					if uses == nil {
						uses = map[string][]secretUse{}
					}
					ref := spec.SOPSEnv()[v]
					uses[u.Path] = append(uses[u.Path], secretUse{where: "env " + v, file: ref.File, key: ref.Key})
				}
			}
		case infraspec.Kind:
			var spec *infraspec.Spec
			if spec, err = infraspec.Parse(u.Content); err == nil {
				for _, group := range []struct {
					word string
					vals map[string]infraspec.Value
				}{{"vars", spec.Vars}, {"env", spec.Env}} {
					for _, k := range slices.Sorted(maps.Keys(group.vals)) {
						if ref := group.vals[k].SecretRef; ref != "" {
							if uses == nil {
								uses = map[string][]secretUse{}
							}
							uses[u.Path] = append(uses[u.Path], secretUse{where: group.word + " " + k, name: ref})
						}
					}
				}
			}
		case blueprintspec.Kind:
			var bp *blueprintspec.Spec
			if bp, err = blueprintspec.Parse(u.Name, u.Content); err == nil {
				if err = servicespec.PowersRefused(bp.Service.Powers(), src.ContainerPowers, src.Name); err != nil {
					err = fmt.Errorf("has a spec.template that %s", strings.TrimPrefix(err.Error(), "has "))
				} else {
					pull(u.Path, bp.Service)
					composes(u.Path, bp.Service, "spec.template.compose")
				}
			}
		default:
			if near := nearKind(u.Kind); near != "" {
				err = fmt.Errorf(`has "kind": %q, which is no kind sluice acts on; did you mean %q? (A unit of a kind sluice does not know is kept as data, and no action reads it; one this close to a known kind is taken for a typo.)`, u.Kind, near)
			}
		}
		if err != nil {
			invalid = append(invalid, unit.Invalid{Path: u.Path, Reason: err.Error()})
			continue
		}
		kept = append(kept, u)
	}
	return kept, invalid, uses, pulled, composed
}

// actedKinds are the kinds of unit that actions act on.
var actedKinds = []string{servicespec.Kind, infraspec.Kind, blueprintspec.Kind}

// nearKind is the kind actions act on that kind is a typo of: the same but
// for letter case, or one edit away (a letter added, dropped, changed, or
// two neighbours swapped; two for a kind of ten letters or more). "" when
// kind is no known kind's typo: "Device" is a kind of its own, not
// "Service".
func nearKind(kind string) string {
	for _, k := range actedKinds {
		if strings.EqualFold(kind, k) || editDistance(strings.ToLower(kind), strings.ToLower(k)) <= 1+len(k)/10 {
			return k
		}
	}
	return ""
}

// editDistance is the optimal string alignment distance between a and b
// (Levenshtein with adjacent swaps), over bytes: kinds are ASCII.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// secretUse is one reference of a unit to a secret: where in the spec, and
// the secret's name, or the SOPS file and key.
type secretUse struct{ where, name, file, key string }

// checkSecretRefs moves the units that name a secret their source does not
// see (set neither for it nor globally) to invalid, with a sentence per
// missing secret: a unit is admitted only when what it needs to run
// exists. The row of such a unit stays as it was, and the path is read
// again by the next sync, so setting the secret and syncing admits it. It
// reads the secrets' names and versions only, never a value.
func checkSecretRefs(ctx context.Context, q db.DBTX, src *db.Source, units []*unit.Unit, invalid []unit.Invalid, uses map[string][]secretUse) ([]*unit.Unit, []unit.Invalid, error) {
	if len(uses) == 0 {
		return units, invalid, nil
	}
	seen := map[string]bool{}
	for _, us := range uses {
		for _, u := range us {
			if u.name != "" {
				seen[u.name] = true
			}
		}
	}
	found, err := secrets.LookupAll(ctx, q, src.ID, slices.Sorted(maps.Keys(seen)))
	if err != nil {
		return nil, nil, err
	}
	kept := units[:0:0]
	for _, u := range units {
		var missing []string
		for _, use := range uses[u.Path] {
			if use.file != "" {
				continue // checkSOPSRefs'
			}
			if _, ok := found[use.name]; !ok {
				missing = append(missing, fmt.Sprintf("%s names secret %s, which is set neither for source %s nor globally (`sluice secret set %s --source %s --from-file FILE` sets it)",
					use.where, use.name, src.Name, use.name, src.Name))
			}
		}
		if len(missing) > 0 {
			invalid = append(invalid, unit.Invalid{Path: u.Path, Reason: strings.Join(missing, "; ")})
			continue
		}
		kept = append(kept, u)
	}
	return kept, invalid, nil
}

// serviceNamesLockKey is the advisory lock a transaction that gives service
// names out takes before it decides, and holds until it commits (see
// decideServiceNames).
const serviceNamesLockKey int64 = 0x736c736e_00000001 // "slsn" + 1

// serviceNameConstraint is the database's own guard of the rule
// decideServiceNames applies: one active service per name, of every source
// (migration 0010). It is deferrable so that a sync can swap two names.
const serviceNameConstraint = "unit_service_name_active"

// blueprintNameConstraint is the same guard for Blueprints (migration
// 0020), whose names the API and the rollouts address as well.
const blueprintNameConstraint = "unit_blueprint_name_active"

// The statements that defer serviceNameConstraint while a sync writes and
// check it before the sync finishes. They are not in queries/ because sqlc
// takes a constraint's name for a table's.
const (
	deferServiceNames = "SET CONSTRAINTS " + serviceNameConstraint + ", " + blueprintNameConstraint + " DEFERRED"
	checkServiceNames = "SET CONSTRAINTS " + serviceNameConstraint + ", " + blueprintNameConstraint + " IMMEDIATE"
)

// isServiceNameTaken reports whether err is serviceNameConstraint refusing
// a write: a writer that did not wait for the names lock gave the name away
// after this transaction decided.
func isServiceNameTaken(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23P01" /* exclusion_violation */ &&
		(pgErr.ConstraintName == serviceNameConstraint || pgErr.ConstraintName == blueprintNameConstraint)
}

// nameHolder is the unit that holds a service name, or is given it by the
// sync deciding.
type nameHolder struct {
	id     uuid.UUID
	path   string
	source string // the source's name
}

// decideServiceNames is the one place a service's name is given, since
// actions address services by name: a name is held by one active Service
// unit of any source. The unit that holds a name keeps it: any other unit
// of this sync that claims it is invalid, with a reason naming the holder,
// and its row is left as it was. A name nobody holds goes to the oldest of
// its claimants (a unit the inventory already knows, renamed or back from
// stale, before a new file), and among new files to the path that sorts
// first. A holder gives its name up when this sync renames it, makes it
// another kind or makes it stale.
//
// A sync that gives names out (creates, renames or brings back a service)
// first takes the names lock, and reads the holders after it: two syncs of
// two sources finishing at once decide one after the other, and the second
// sees what the first gave. serviceNameConstraint backs the decision in the
// database (see finishing.retryNames).
//
// byID holds the rows the sync loaded, locked; invalidPaths gains the paths
// of the units that lost, so that their rows stay as they were.
//
// Blueprint names are decided the same way, apart from services' (a
// Blueprint runs on its nodes as bp-NAME).
func (p *plan) decideServiceNames(ctx context.Context, q *db.Queries, units []*unit.Unit, byID map[uuid.UUID]*db.Unit, invalidPaths map[string]bool) ([]*unit.Unit, error) {
	units, err := p.decideNames(ctx, q, servicespec.Kind, "service", units, byID, invalidPaths)
	if err != nil {
		return nil, err
	}
	return p.decideNames(ctx, q, blueprintspec.Kind, "Blueprint", units, byID, invalidPaths)
}

// decideNames decides the names of the units of kind (word in a reason).
func (p *plan) decideNames(ctx context.Context, q *db.Queries, kind, word string, units []*unit.Unit, byID map[uuid.UUID]*db.Unit, invalidPaths map[string]bool) ([]*unit.Unit, error) {
	var claims []*unit.Unit
	givesNames := false
	for _, u := range units {
		if u.Kind != kind {
			continue
		}
		claims = append(claims, u)
		if r, ok := byID[u.ID]; !ok || !active(r.Status) || r.Kind != kind || r.Name != u.Name {
			givesNames = true
		}
	}
	if !givesNames {
		// Every service keeps the name its row holds already: the constraint
		// leaves nobody else holding it.
		return units, nil
	}
	if err := q.ServiceNamesLock(ctx, serviceNamesLockKey); err != nil {
		return nil, fmt.Errorf("wait for the service names lock: %w", err)
	}
	names := make([]string, 0, len(claims))
	for _, u := range claims {
		names = append(names, u.Name)
	}
	holders, err := q.ServiceListByNames(ctx, &db.ServiceListByNamesParams{Kind: kind, Names: names})
	if err != nil {
		return nil, fmt.Errorf("load services by name: %w", err)
	}
	// The oldest claimant first: a row's age, then new files by path.
	slices.SortFunc(claims, func(a, b *unit.Unit) int {
		ra, oka := byID[a.ID]
		rb, okb := byID[b.ID]
		switch {
		case oka && okb:
			if c := ra.CreatedAt.Compare(rb.CreatedAt); c != 0 {
				return c
			}
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})

	// Losing makes a path invalid, which keeps the row at that path as it
	// was, and so may keep a name this decision took as given up: decide
	// again with the losers out until nobody more loses. Losers only grow,
	// so this ends.
	lost := map[uuid.UUID]string{} // unit id -> why
	for {
		invalid := maps.Clone(invalidPaths)
		valid := make(map[uuid.UUID]*unit.Unit, len(units))
		for _, u := range units {
			if _, ok := lost[u.ID]; ok {
				invalid[u.Path] = true
				continue
			}
			valid[u.ID] = u
		}
		seen := make(map[uuid.UUID]bool, len(valid))
		for id := range valid {
			seen[id] = true
		}
		held := make(map[string]nameHolder, len(holders))
		for _, h := range holders {
			if h.SourceID == p.source.ID {
				if u, ok := valid[h.ID]; ok && (u.Kind != kind || u.Name != h.Name) {
					continue // renamed, or no longer a service
				}
				if r, ok := byID[h.ID]; ok && p.goesStale(r, seen, invalid) {
					continue // its file left
				}
			}
			held[h.Name] = nameHolder{id: h.ID, path: h.Path, source: h.SourceName}
		}
		more := false
		for _, u := range claims {
			if _, ok := lost[u.ID]; ok {
				continue
			}
			h, ok := held[u.Name]
			switch {
			case !ok:
				held[u.Name] = nameHolder{id: u.ID, path: u.Path, source: p.source.Name}
			case h.id != u.ID:
				lost[u.ID] = fmt.Sprintf("%s name %s is already held by %s of source %s; rename one", word, u.Name, h.path, h.source)
				more = true
			}
		}
		if !more {
			break
		}
	}
	if len(lost) == 0 {
		return units, nil
	}
	kept := units[:0:0]
	for _, u := range units {
		if why, ok := lost[u.ID]; ok {
			p.invalid = append(p.invalid, unit.Invalid{Path: u.Path, Reason: why})
			invalidPaths[u.Path] = true
			continue
		}
		kept = append(kept, u)
	}
	return kept, nil
}

// sopsFiles decrypts the SOPS files a sync's units name, each once, at
// the synced commit.
type sopsFiles struct {
	s      *Service
	src    *db.Source
	commit string
	got    map[string]sopsFile
}

type sopsFile struct {
	values map[string]string
	err    error
}

// checkSOPSRefs moves the units that take a value of a SOPS file that does
// not give it to invalid, with a sentence: the file is not in the commit,
// does not decrypt with the age identity sluice holds (SOPSIdentity), fails
// its MAC, or has no such key. What was decrypted is kept nowhere.
func (s *Service) checkSOPSRefs(ctx context.Context, src *db.Source, commit string, units []*unit.Unit, invalid []unit.Invalid, uses map[string][]secretUse) ([]*unit.Unit, []unit.Invalid) {
	files := &sopsFiles{s: s, src: src, commit: commit, got: map[string]sopsFile{}}
	kept := units[:0:0]
	for _, u := range units {
		var bad []string
		for _, use := range uses[u.Path] {
			if use.file == "" {
				continue
			}
			if why := files.check(ctx, use.file, use.key); why != "" {
				bad = append(bad, fmt.Sprintf("%s takes key %s of SOPS file %s, which %s", use.where, use.key, use.file, why))
			}
		}
		if len(bad) > 0 {
			invalid = append(invalid, unit.Invalid{Path: u.Path, Reason: strings.Join(bad, "; ")})
			continue
		}
		kept = append(kept, u)
	}
	return kept, invalid
}

// check says why file does not give key, or "".
func (f *sopsFiles) check(ctx context.Context, file, key string) string {
	got, ok := f.got[file]
	if !ok {
		got.values, got.err = f.decrypt(ctx, file)
		f.got[file] = got
	}
	if got.err != nil {
		return lowerFirst(strings.TrimSuffix(f.s.Redactor.String(errs.MessageOf(got.err)), "."))
	}
	if _, ok := got.values[key]; !ok {
		return "has no such top-level key"
	}
	return ""
}

func (f *sopsFiles) decrypt(ctx context.Context, file string) (map[string]string, error) {
	if f.s.Secrets == nil {
		return nil, errors.New("this process cannot decrypt: it keeps no secrets (run the sync under serve or worker)")
	}
	// The sync fetched the commit: read it as it is, never fetching again
	// in the middle of the sync (ReadFileAt would, for a file it lacks).
	mirror, err := f.s.mirror(f.src)
	if err != nil {
		return nil, err
	}
	data, _, err := mirror.ReadFile(ctx, f.commit, file)
	if err != nil {
		return nil, err
	}
	values, _, err := f.s.Secrets.DecryptSOPS(ctx, f.s.Pool, f.src.ID, file, data)
	return values, err
}

// lowerFirst continues a sentence with another: "Commit …" becomes "commit …".
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || !unicode.IsUpper(r) {
		return s
	}
	if r2, _ := utf8.DecodeRuneInString(s[n:]); unicode.IsUpper(r2) {
		return s // an initialism, such as "MAC"
	}
	return string(unicode.ToLower(r)) + s[n:]
}
