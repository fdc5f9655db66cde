package gitops_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/gittest"
	"sluice/internal/journal"
	"sluice/internal/source"
	"sluice/internal/unit"
)

func TestSyncIdentity(t *testing.T) {
	t.Parallel()

	declared := uuid.MustParse("6f1c2a52-5d0b-4c39-9d0e-8a1b2c3d4e5f")
	files := map[string]string{
		"apps/web.json": svcUnit("web", "nginx:1"),
		"apps/api.json": svcUnitWithID(declared.String(), "api", "api:1"),
		"db/main.json":  `{"kind":"Database","metadata":{"name":"main","id":"not-a-uuid"},"spec":{}}`,
	}

	t.Run("DerivesIdentityFromPathUnlessMetadataIDIsAUUID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		c1 := b.Commit(t, "Add three units\n\nWith a body.", files)

		res := b.sync(t, false)
		require.Equal(t, c1, res.Commit)
		require.Equal(t, "Add three units\n\nWith a body.", res.CommitMessage)
		require.True(t, res.Full, "a first sync walks everything")
		require.Equal(t, []string{"apps/api.json", "apps/web.json", "db/main.json"}, res.Created)
		require.Empty(t, res.Updated)
		require.Empty(t, res.Stale)
		require.Empty(t, res.Invalid)
		require.Zero(t, res.Unchanged)

		units := b.units(t)
		require.Len(t, units, 3)
		require.Equal(t, pathID("apps/web.json"), units["apps/web.json"].ID)
		require.Equal(t, uuid.Version(5), units["apps/web.json"].ID.Version())
		require.Equal(t, declared, units["apps/api.json"].ID)
		require.Equal(t, pathID("db/main.json"), units["db/main.json"].ID, "a metadata.id that is no UUID falls back to the path")
		for p, content := range files {
			u := units[p]
			require.Equal(t, "pending", u.Status)
			require.Equal(t, hashOf(t, content), u.ContentHash, p)
			require.Equal(t, c1, u.GitCommit)
			require.Equal(t, source.DefaultID, u.SourceID)
		}
		require.Equal(t, "Config", units["apps/web.json"].Kind)
		require.Equal(t, "web", units["apps/web.json"].Name)

		st, err := b.svc.GetStatus(b.ctx)
		require.NoError(t, err)
		require.False(t, st.Syncing)
		require.Equal(t, 3, st.TrackedCount)
		require.Equal(t, 3, st.Counts["pending"])
		require.NotNil(t, st.LastSync)
		require.Equal(t, journal.StateSucceeded, st.LastSync.State)
		require.Equal(t, c1, st.LastSync.Commit)
		require.Equal(t, 3, st.LastSync.Created)
		require.Nil(t, st.NextSyncAt, "interval 0 is manual only")
	})

	t.Run("ReformattingChangesNoHashAndAContentChangeDoes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", files)
		b.sync(t, false)
		before := b.unit(t, "apps/web.json")

		reformatted := "{\n  \"spec\": {\n    \"ports\": [ 80, 443 ],\n    \"image\": \"nginx:1\"\n  },\n" +
			"  \"metadata\": { \"name\": \"web\" },\n  \"kind\": \"Config\"\n}\n"
		c2 := b.Commit(t, "Reformat web", map[string]string{"apps/web.json": reformatted})
		res := b.sync(t, false)
		require.Equal(t, c2, res.Commit)
		require.False(t, res.Full)
		require.Empty(t, res.Created)
		require.Equal(t, []string{}, res.Updated)
		require.Equal(t, 3, res.Unchanged)
		after := b.unit(t, "apps/web.json")
		require.Equal(t, before.ContentHash, after.ContentHash)
		require.Equal(t, before.GitCommit, after.GitCommit, "an unchanged unit keeps the commit it came from")

		changed := svcUnit("web", "nginx:2")
		c3 := b.Commit(t, "Upgrade web", map[string]string{"apps/web.json": changed})
		res = b.sync(t, false)
		require.Equal(t, []string{"apps/web.json"}, res.Updated)
		require.Empty(t, res.Created)
		require.Equal(t, 2, res.Unchanged)
		after = b.unit(t, "apps/web.json")
		require.NotEqual(t, before.ContentHash, after.ContentHash)
		require.Equal(t, hashOf(t, changed), after.ContentHash)
		require.Equal(t, c3, after.GitCommit)
		require.Equal(t, before.ID, after.ID)

		// A sync without a new commit changes nothing.
		res = b.sync(t, false)
		require.Empty(t, res.Created)
		require.Empty(t, res.Updated)
		require.Equal(t, 3, res.Unchanged)
	})

	t.Run("IdentitySurvivesAFreshStore", func(t *testing.T) {
		t.Parallel()
		r := gittest.New(t)
		r.Commit(t, "one", files)
		first := setup(t, setupOpts{repo: r})
		first.sync(t, false)
		// A second installation: a new database and config root, same repository.
		second := setup(t, setupOpts{repo: r})
		second.sync(t, true)

		a, z := first.units(t), second.units(t)
		require.Len(t, z, len(a))
		for p, u := range a {
			require.Equal(t, u.ID, z[p].ID, p)
			require.Equal(t, u.ContentHash, z[p].ContentHash, p)
		}
	})
}

func TestSyncStaleAndRevive(t *testing.T) {
	t.Parallel()

	base := map[string]string{
		"apps/web.json": svcUnit("web", "nginx:1"),
		"apps/api.json": svcUnit("api", "api:1"),
	}

	t.Run("DeletedUnitGoesStaleAndReturnsPendingWhenNeverApplied", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", base)
		b.sync(t, false)
		web := b.unit(t, "apps/web.json")

		b.Commit(t, "Retire web", nil, "apps/web.json")
		res := b.sync(t, false)
		require.Equal(t, []string{"apps/web.json"}, res.Stale)
		require.Equal(t, 1, res.Unchanged)
		stale := b.unit(t, "apps/web.json")
		require.Equal(t, "stale", stale.Status, "the row stays: a unit is never deleted")
		require.Equal(t, web.ID, stale.ID)
		require.Equal(t, web.ContentHash, stale.ContentHash)
		require.Equal(t, 2, b.count(t, "SELECT count(*) FROM unit"))

		b.Commit(t, "Bring web back", map[string]string{"apps/web.json": base["apps/web.json"]})
		res = b.sync(t, false)
		require.Equal(t, []string{"apps/web.json"}, res.Updated)
		require.Empty(t, res.Created)
		back := b.unit(t, "apps/web.json")
		require.Equal(t, "pending", back.Status)
		require.Equal(t, web.ID, back.ID)
		require.Nil(t, back.StatusBeforeStale)
	})

	t.Run("AppliedUnitReturnsApplied", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", base)
		b.sync(t, false)
		b.exec(t, "UPDATE unit SET status = 'applied', last_applied_hash = content_hash WHERE path = 'apps/web.json'")

		b.Commit(t, "Retire web", nil, "apps/web.json")
		require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Stale)
		require.Equal(t, "stale", b.unit(t, "apps/web.json").Status)

		b.Commit(t, "Bring web back", map[string]string{"apps/web.json": base["apps/web.json"]})
		require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Updated)
		back := b.unit(t, "apps/web.json")
		require.Equal(t, "applied", back.Status)
		require.Equal(t, back.ContentHash, *back.LastAppliedHash)
	})

	t.Run("DestroyedUnitReturnsPending", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", base)
		b.sync(t, false)
		b.exec(t, "UPDATE unit SET status = 'applied', last_applied_hash = content_hash WHERE path = 'apps/web.json'")
		b.Commit(t, "Retire web", nil, "apps/web.json")
		b.sync(t, false)
		b.exec(t, "UPDATE unit SET status = 'destroyed' WHERE path = 'apps/web.json'")

		b.Commit(t, "Bring web back", map[string]string{"apps/web.json": base["apps/web.json"]})
		require.Equal(t, []string{"apps/web.json"}, b.sync(t, false).Updated)
		require.Equal(t, "pending", b.unit(t, "apps/web.json").Status)
	})

	t.Run("StaleUnitIsNotStaledAgainNorDestroyedUnitStaled", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", base)
		b.sync(t, false)
		b.exec(t, "UPDATE unit SET status = 'destroyed' WHERE path = 'apps/api.json'")
		b.Commit(t, "Retire both", nil, "apps/web.json", "apps/api.json")
		res := b.sync(t, false)
		require.Equal(t, []string{"apps/web.json"}, res.Stale)
		require.Equal(t, "destroyed", b.unit(t, "apps/api.json").Status)

		res = b.sync(t, true)
		require.Empty(t, res.Stale, "a full sync does not stale what is stale already")
		require.Zero(t, res.Unchanged)
	})

	for _, full := range []bool{false, true} {
		name := "MovedUnitWithDeclaredIDIsUpdatedNotRecreated"
		if full {
			name += "OnFullSync"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := uuid.New()
			b := setup(t, setupOpts{})
			content := svcUnitWithID(id.String(), "web", "nginx:1")
			b.Commit(t, "one", map[string]string{"apps/web.json": content, "apps/api.json": base["apps/api.json"]})
			b.sync(t, false)

			b.exec(t, "UPDATE unit SET status = 'applied', last_applied_hash = content_hash WHERE id = $1", id)
			b.Commit(t, "Move web", map[string]string{"services/web.json": content}, "apps/web.json")
			res := b.sync(t, full)
			require.Equal(t, full, res.Full)
			require.Equal(t, []string{"services/web.json"}, res.Updated)
			require.Empty(t, res.Created)
			require.Empty(t, res.Stale)
			require.Empty(t, res.Invalid)
			require.Equal(t, 1, res.Unchanged)

			units := b.units(t)
			require.Len(t, units, 2)
			moved := units["services/web.json"]
			require.Equal(t, id, moved.ID)
			require.Equal(t, "applied", moved.Status, "a move keeps the unit's state")
		})
	}
}

func TestSyncInvalidUnits(t *testing.T) {
	t.Parallel()

	dupID := uuid.New().String()
	for _, full := range []bool{false, true} {
		name := "IncrementalSyncKeepsWhatIsBadAndSyncsTheRest"
		if full {
			name = "FullSyncKeepsWhatIsBadAndSyncsTheRest"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{})
			b.Commit(t, "one", map[string]string{
				"apps/web.json": svcUnit("web", "nginx:1"),
				"apps/api.json": svcUnit("api", "api:1"),
			})
			b.sync(t, false)
			b.exec(t, "UPDATE unit SET status = 'applied', last_applied_hash = content_hash WHERE path = 'apps/web.json'")
			web := b.unit(t, "apps/web.json")

			b.Symlink(t, "bad/link.json", "../apps/api.json")
			b.Symlink(t, "bad/escape.json", "/etc/passwd")
			huge := `{"kind":"Config","metadata":{"name":"huge"},"spec":{"blob":"` + strings.Repeat("x", unit.MaxSize) + `"}}`
			c2 := b.Commit(t, "A mixed bag", map[string]string{
				"apps/web.json":    `{"kind":"Config","metadata":{"name":"web"},"spec":{"image":`, // broken
				"apps/api.json":    svcUnit("api", "api:2"),
				"apps/new.json":    svcUnit("new", "new:1"),
				"bad/no-kind.json": `{"metadata":{"name":"x"},"spec":{}}`,
				"bad/no-name.json": `{"kind":"Config","metadata":{},"spec":{}}`,
				"bad/huge.json":    huge,
				"dup/one.json":     svcUnitWithID(dupID, "one", "one:1"),
				"dup/two.json":     svcUnitWithID(dupID, "two", "two:1"),
				"apps/readme.md":   "not a unit",
				"apps/config.yaml": "kind: not-a-unit",
			})

			res := b.sync(t, full)
			require.Equal(t, c2, res.Commit)
			require.Equal(t, full, res.Full)
			reasons := invalidPaths(res)
			require.Len(t, reasons, 8, "%v", res.Invalid)
			require.Contains(t, reasons["apps/web.json"], "not valid JSON")
			require.Contains(t, reasons["bad/no-kind.json"], `"kind"`)
			require.Contains(t, reasons["bad/no-name.json"], "metadata.name")
			require.Contains(t, reasons["bad/huge.json"], "bytes")
			require.Contains(t, reasons["bad/link.json"], "symbolic link")
			require.Contains(t, reasons["bad/escape.json"], "symbolic link")
			require.Contains(t, reasons["dup/one.json"], dupID)
			require.Contains(t, reasons["dup/one.json"], "dup/two.json")
			require.Contains(t, reasons["dup/two.json"], "dup/one.json")
			for p, r := range reasons {
				require.NotEmpty(t, r, p)
				require.NotContains(t, r, b.configRoot, "a reason must not reveal where the checkout lives")
			}

			require.Equal(t, []string{"apps/new.json"}, res.Created)
			require.Equal(t, []string{"apps/api.json"}, res.Updated)
			require.Empty(t, res.Stale)

			units := b.units(t)
			require.Len(t, units, 3)
			kept := units["apps/web.json"]
			require.Equal(t, web.ContentHash, kept.ContentHash, "a broken file leaves its unit as it was")
			require.Equal(t, "applied", kept.Status)
			require.Equal(t, web.GitCommit, kept.GitCommit)
			require.Equal(t, web.UpdatedAt, kept.UpdatedAt)
			require.Equal(t, hashOf(t, svcUnit("api", "api:2")), units["apps/api.json"].ContentHash)
			require.Equal(t, c2, units["apps/api.json"].GitCommit)

			st, err := b.svc.GetStatus(b.ctx)
			require.NoError(t, err)
			require.Equal(t, 8, st.LastSync.Invalid)
			events, err := b.journal.Events(b.ctx, st.LastSync.JournalID, 0, 100)
			require.NoError(t, err)
			warned := 0
			for _, e := range events {
				if e.Level == journal.LevelWarn && strings.HasPrefix(e.Message, "invalid unit ") {
					warned++
				}
			}
			require.Equal(t, 8, warned, "every invalid unit is a warning in the journal")

			// Fixing the file brings the unit up to date.
			b.Commit(t, "Fix web", map[string]string{"apps/web.json": svcUnit("web", "nginx:2")})
			res = b.sync(t, false)
			require.Equal(t, []string{"apps/web.json"}, res.Updated)
			require.Empty(t, res.Created)
			require.Empty(t, res.Stale)
			require.Equal(t, "applied", b.unit(t, "apps/web.json").Status, "content changed; applying is another action's job")
			reasons = invalidPaths(res)
			require.Len(t, reasons, 7, "files still invalid are reported until they are fixed: %v", res.Invalid)
			require.NotContains(t, reasons, "apps/web.json")
		})
	}

	t.Run("ChangedFileClaimingTheIDOfAnUnchangedUnitIsInvalid", func(t *testing.T) {
		t.Parallel()
		id := uuid.New().String()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnitWithID(id, "web", "nginx:1")})
		b.sync(t, false)
		web := b.unit(t, "apps/web.json")

		b.Commit(t, "Copy web", map[string]string{"apps/web2.json": svcUnitWithID(id, "web2", "nginx:1")})
		res := b.sync(t, false)
		require.Contains(t, invalidPaths(res)["apps/web2.json"], "apps/web.json")
		require.Empty(t, res.Created)
		require.Empty(t, res.Updated)
		require.Empty(t, res.Stale)
		require.Equal(t, web.ContentHash, b.unit(t, "apps/web.json").ContentHash)

		res = b.sync(t, true)
		reasons := invalidPaths(res)
		require.Len(t, reasons, 2, "a full sync sees both files")
		require.Empty(t, res.Stale, "the unit of an invalid path is left as it was")
		require.Equal(t, web.ContentHash, b.unit(t, "apps/web.json").ContentHash)
	})

	t.Run("FixingADuplicateIDSyncsTheOtherFile", func(t *testing.T) {
		t.Parallel()
		id := uuid.New().String()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{"apps/seed.json": svcUnit("seed", "s:1")})
		b.sync(t, false)
		b.Commit(t, "Two files, one id", map[string]string{
			"dup/one.json": svcUnitWithID(id, "one", "one:1"),
			"dup/two.json": svcUnitWithID(id, "two", "two:1"),
		})
		res := b.sync(t, false)
		require.Len(t, res.Invalid, 2)
		require.Empty(t, res.Created)

		// Only dup/two.json changes, but dup/one.json is valid now too.
		b.Commit(t, "Give two its own id", map[string]string{"dup/two.json": svcUnit("two", "two:1")})
		res = b.sync(t, false)
		require.Empty(t, res.Invalid)
		require.Equal(t, []string{"dup/one.json", "dup/two.json"}, res.Created)
		units := b.units(t)
		require.Equal(t, uuid.MustParse(id), units["dup/one.json"].ID)
		require.Equal(t, pathID("dup/two.json"), units["dup/two.json"].ID)
	})
}

func TestSyncFailures(t *testing.T) {
	t.Parallel()

	t.Run("MissingPathFailsWithAnOperatorSentenceAndStalesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		b.sync(t, false)
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: b.Bare, Path: "aps"}, "test")
		require.NoError(t, err)

		run := b.syncRun(t, false)
		require.Equal(t, journal.StateFailed, run.State)
		require.Equal(t, `The path "aps" is not a directory at commit `+gittest.Git(t, b.Pusher, "rev-parse", "--short=12", "HEAD")+" of "+b.Bare+
			"; fix the path in the GitOps settings, or add units under it.", *run.Error)
		require.Equal(t, "pending", b.unit(t, "apps/web.json").Status)
	})

	for name, tc := range map[string]struct {
		url    func(b *testBundle) string
		reason func(b *testBundle) string
	}{
		"MissingRepository": {
			url: func(b *testBundle) string { return b.Bare + "-missing" },
			reason: func(b *testBundle) string {
				return "There is no repository at file://" + b.Bare + "-missing; check the remote URL."
			},
		},
		"UnreachableHost": {
			url:    func(*testBundle) string { return "http://127.0.0.1:1/x.git" },
			reason: func(*testBundle) string { return "Cannot reach http://127.0.0.1:1/x.git: " },
		},
	} {
		t.Run(name+"FailsOnceAndWaitsForTheNextTick", func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{noSettings: true})
			url := tc.url(b)
			_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: url}, "test")
			require.NoError(t, err)

			run := b.syncRun(t, false)
			require.Equal(t, journal.StateFailed, run.State)
			require.NotNil(t, run.Error)
			msg := *run.Error
			require.True(t, strings.HasPrefix(msg, tc.reason(b)), "%q", msg)
			require.NotContains(t, msg, "\n")
			require.True(t, strings.HasSuffix(msg, "."), "one sentence: %q", msg)
			require.NotContains(t, strings.TrimSuffix(msg, "."), ". ", "one sentence: %q", msg)

			job := b.jobOf(t, run, rivertype.JobStateDiscarded)
			require.Equal(t, 1, job.Attempt)
			require.Equal(t, 1, job.MaxAttempts, "a failed sync waits for the next interval")
			time.Sleep(100 * time.Millisecond)
			require.Equal(t, 1, b.count(t, "SELECT count(*) FROM journal_run WHERE river_job_id IS NOT NULL"), "River does not retry")
			require.Equal(t, 0, b.count(t, "SELECT count(*) FROM unit"))
			require.Nil(t, b.source(t).SyncedCommit)

			st, err := b.svc.GetStatus(b.ctx)
			require.NoError(t, err)
			require.False(t, st.Syncing)
			require.Equal(t, journal.StateFailed, st.LastSync.State)
			require.Equal(t, msg, st.LastSync.Error)

			_, err = b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: url, SyncIntervalSec: 60}, "test")
			require.NoError(t, err)
			b.exec(t, "UPDATE source SET last_tick_at = now() - interval '2 minutes'")
			require.NoError(t, b.svc.Tick(b.ctx))
			runs, err := b.journal.List(b.ctx, journal.ListParams{Action: source.SyncAction})
			require.NoError(t, err)
			require.Len(t, runs, 2, "the tick starts exactly one new run")
			require.Equal(t, journal.RequestedBySystem, runs[0].RequestedBy)
			require.Nil(t, runs[0].RetryOf, "a new run, not a retry")
			again := b.wait(t, runs[0].ID)
			require.Equal(t, journal.StateFailed, again.State)
			b.jobOf(t, again, rivertype.JobStateDiscarded)
			require.Zero(t, b.source(t).SkippedTicks)
		})
	}
}

func TestSyncRepositoryChange(t *testing.T) {
	t.Parallel()

	t.Run("AnotherRepositoryInTheSettingsIsFollowedAndTheOldUnitsGoStale", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "old", map[string]string{"old.json": svcUnit("old", "a"), "both.json": svcUnit("both", "a")})
		b.sync(t, false)
		require.NoError(t, os.MkdirAll(filepath.Join(b.configRoot, "archive", "x"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(b.configRoot, "archive", "x", "state"), []byte("keep"), 0o644))

		other := gittest.New(t)
		other.Commit(t, "new", map[string]string{"new.json": svcUnit("new", "a"), "both.json": svcUnit("both", "a")})
		_, err := b.svc.Sources.PutSettings(b.ctx, source.SettingsInput{RepoURL: other.Bare, Branch: "main"}, "test")
		require.NoError(t, err)

		res := b.sync(t, false)
		require.True(t, res.Full)
		require.Equal(t, []string{"new.json"}, res.Created)
		require.Equal(t, []string{"old.json"}, res.Stale)
		require.NoFileExists(t, filepath.Join(b.configRoot, "old.json"))
		require.FileExists(t, filepath.Join(b.configRoot, "new.json"))
		require.FileExists(t, filepath.Join(b.configRoot, "archive", "x", "state"), "untracked files stay")

		// And the next sync is an ordinary incremental one.
		res = b.sync(t, false)
		require.False(t, res.Full)
	})
}

// phaseNames are the names of a receipt's phases, in order.
func phaseNames(ps journal.Phases) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// requireWithinRun requires that a receipt's phases add up to no more than
// its run took.
func requireWithinRun(t testing.TB, run *db.JournalRun, ps journal.Phases) {
	t.Helper()
	require.NotNil(t, run.StartedAt)
	require.NotNil(t, run.FinishedAt)
	var sum int64
	for _, p := range ps {
		sum += p.Ms
	}
	require.LessOrEqual(t, sum, run.FinishedAt.Sub(*run.StartedAt).Milliseconds()+1, "phases %v", ps)
}

func TestSyncStages(t *testing.T) {
	t.Parallel()

	all := []string{"fetch", "diff", "walk", "admit", "write", "finish"}

	t.Run("TheReceiptTimesEachStageInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.Commit(t, "one", map[string]string{"apps/web.json": svcUnit("web", "nginx:1")})
		run := b.syncRun(t, false)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", errText(run))
		res := resultOf(t, run)
		require.Equal(t, all, phaseNames(res.Phases))
		requireWithinRun(t, run, res.Phases)

		// A sync that finds nothing changed runs every stage too.
		require.Equal(t, all, phaseNames(b.sync(t, false).Phases))
	})

	t.Run("AFailedFinishRecordsTheStagesOutsideItsTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.exec(t, "ALTER TABLE unit ADD CONSTRAINT test_refuses_bad CHECK (path <> 'apps/bad.json')")
		b.Commit(t, "one", map[string]string{"apps/bad.json": svcUnit("bad", "bad:1")})
		run := b.syncRun(t, false)
		require.Equal(t, journal.StateFailed, run.State)
		require.Equal(t, []string{"fetch", "diff", "walk"}, phaseNames(resultOf(t, run).Phases),
			"the stages of the transaction that was rolled back are not on the receipt")
	})

	t.Run("ACandidateAndItsAcceptTimeTheirStages", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, source.PolicyManual)
		b.Commit(t, "second", map[string]string{"a.json": svcUnit("a", "x:2")})
		res := b.sync(t, false)
		require.True(t, res.CandidateWaits)
		require.Equal(t, all, phaseNames(res.Phases))

		c, err := b.svc.Sources.GetCandidate(b.ctx, source.DefaultName)
		require.NoError(t, err)
		run := b.accept(t, "alice", c)
		require.Equal(t, journal.StateSucceeded, run.State, "%v", errText(run))
		accepted := resultOf(t, run)
		require.Equal(t, []string{"admit", "write", "finish"}, phaseNames(accepted.Phases), "an accept fetches nothing")
		requireWithinRun(t, run, accepted.Phases)
	})
}
