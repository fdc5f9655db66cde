package infra_test

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/secretbox"
	"sluice/internal/secrets"
	"sluice/internal/source"
	"sluice/internal/unit"
)

// loginModule takes a password as a provider takes a credential, and keeps
// it in a terraform_data's input, which the root's sensitive variable makes
// sensitive.
const loginModule = `variable "user" {
  type = string
}

variable "password" {
  type = string
}

variable "region" {
  type = string
}

resource "terraform_data" "login" {
  input = "${var.user}:${var.password}"
}

resource "terraform_data" "region" {
  input = var.region
}
`

func loginJSON(extra string) string {
	return `{"kind":"Infrastructure","metadata":{"name":"login"},"spec":{"module":"infra/modules/login","inputs":{"user":"alice"},` +
		`"vars":{"password":{"secretRef":"db-password"},"region":"eu-west-1"},` +
		`"env":{"PROVIDER_TOKEN":{"secretRef":"provider-token"}` + extra + `}}}`
}

func TestSecrets(t *testing.T) {
	t.Parallel()

	b := setup(t)
	key, err := secretbox.NewKey()
	require.NoError(t, err)
	box, err := secretbox.New(secretbox.Opts{Key: key})
	require.NoError(t, err)
	sec := &secrets.Service{DB: b.pool, Journal: b.journal, Box: box, Redactor: b.svc.Redactor}
	b.svc.Secrets = sec

	// terraform, behind a script that records the hash of the provider's
	// token it was given, one line a command: the honest proof that env
	// reaches terraform's process, since terraform_data cannot read it.
	witness := t.TempDir()
	hashFile := filepath.Join(witness, "token-hashes")
	wrapper := filepath.Join(witness, "terraform")
	require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\nprintf '%s' \"$PROVIDER_TOKEN\" | sha256sum >> "+hashFile+"\nexec "+terraformBin(t)+" \"$@\"\n"), 0o755))
	b.svc.TerraformBin = wrapper
	commands := func() []string {
		data, err := os.ReadFile(hashFile)
		if os.IsNotExist(err) {
			return nil
		}
		require.NoError(t, err)
		return strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	hash := func(v []byte) string {
		sum := sha256.Sum256(v)
		return hex.EncodeToString(sum[:]) + "  -"
	}

	// Values unique to this test, with what a naive format breaks on.
	first := []byte("tfpw-one-" + rand.Text() + "\n$HOME %s 'q' \"dq\" \\ ${var.x} end")
	second := []byte("tfpw-two-" + rand.Text() + " rotated")
	token := []byte("tftoken-" + rand.Text() + "\n=x")
	set := func(name, src string, v []byte) {
		t.Helper()
		_, _, err := sec.Set(b.ctx, secrets.SetParams{Name: name, Source: src, Value: v, By: "alice"})
		require.NoError(t, err)
	}
	set("db-password", "", first)
	set("provider-token", source.DefaultName, token)

	b.Commit(t, "login, its password a secret", map[string]string{"infra/login.json": loginJSON(""), "infra/modules/login/main.tf": loginModule})
	b.sync(t)
	do := func(action string) (*db.JournalRun, *infra.Receipt) {
		t.Helper()
		res, err := b.svc.Request(b.ctx, action, "login", "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		var rec infra.Receipt
		require.NoError(t, json.Unmarshal(run.Result, &rec))
		return run, &rec
	}
	drift := func() *infra.Drift {
		t.Helper()
		res, err := b.svc.Request(b.ctx, infra.ActionDriftCheck, "login", "alice")
		require.NoError(t, err)
		run := b.wait(t, res.Run.ID)
		require.Equal(t, journal.StateSucceeded, run.State, "drift check: %v", run.Error)
		var d infra.Drift
		require.NoError(t, json.Unmarshal(run.Result, &d))
		return &d
	}
	uses := func(password int32) []infra.SecretUse {
		return []infra.SecretUse{
			{For: "var.password", Name: "db-password", Version: password},
			{For: "env.PROVIDER_TOKEN", Name: "provider-token", Scope: source.DefaultName, Version: 1},
		}
	}

	run, rec := do(infra.ActionPlan)
	require.Equal(t, journal.StateSucceeded, run.State, "plan: %v", run.Error)
	require.Equal(t, infra.Summary{Add: 2}, rec.Summary)
	require.Contains(t, rec.Excerpt, "+ input  = (sensitive value)", "the receipt's plan hides the value")
	require.Contains(t, rec.Excerpt, `+ input  = "eu-west-1"`, "a plain var is shown")
	require.ElementsMatch(t, uses(1), rec.Secrets)
	require.Contains(t, b.events(t, run.ID), "secrets for terraform: ")
	require.Contains(t, b.events(t, run.ID), "var.password from secret/db-password v1")

	run, rec = do(infra.ActionApply)
	require.Equal(t, journal.StateSucceeded, run.State, "apply: %v", run.Error)
	require.ElementsMatch(t, uses(1), rec.Secrets)
	require.Contains(t, rec.ApplyExcerpt, "Apply complete! Resources: 2 added")
	hashes := commands()
	require.NotEmpty(t, hashes)
	for _, h := range hashes {
		require.Equal(t, hash(token), h, "every terraform command got the token, byte for byte")
	}
	d := drift()
	require.Equal(t, infra.InSync, d.Status, "%+v", d)
	require.Empty(t, d.Findings)

	// Rotated: the drift check says so, and its plan shows the change
	// without either value.
	set("db-password", "", second)
	d = drift()
	require.Equal(t, infra.Unknown, d.Status)
	require.True(t, d.DesiredAhead)
	require.False(t, d.LiveDrift)
	require.Equal(t, []infra.Finding{{Fact: "Secret db-password was rotated.", Proof: "applied version 1; version 2 is current."}}, d.Findings)
	require.Contains(t, d.Reason, "Secret db-password was rotated.")
	require.Equal(t, &infra.Summary{Change: 1}, d.Summary)
	require.Equal(t, []string{"module.main.terraform_data.login"}, d.Addresses)
	require.Contains(t, d.Excerpt, "~ input  = (sensitive value)")
	run, rec = do(infra.ActionApply)
	require.Equal(t, journal.StateSucceeded, run.State, "apply: %v", run.Error)
	require.ElementsMatch(t, uses(2), rec.Secrets)
	require.Equal(t, infra.Summary{Change: 1}, rec.Summary)
	d = drift()
	require.Equal(t, infra.InSync, d.Status, "%+v", d)

	// Deleted: the plan fails with the sentence, and terraform never ran.
	_, _, err = sec.Delete(b.ctx, "provider-token", source.DefaultName, "alice")
	require.NoError(t, err)
	ran := len(commands())
	run, _ = do(infra.ActionPlan)
	require.Equal(t, journal.StateFailed, run.State)
	require.Contains(t, *run.Error, "Env PROVIDER_TOKEN of infrastructure login takes secret provider-token, which does not resolve: "+
		secrets.NotSet("provider-token", source.DefaultName).Error()+" Nothing was run.")
	require.Len(t, commands(), ran, "nothing ran")
	d = drift()
	require.Equal(t, infra.Unknown, d.Status)
	require.Equal(t, "Secret provider-token was deleted.", d.Findings[0].Fact)
	require.Contains(t, d.Reason, "which does not resolve: No secret provider-token is set")
	require.Len(t, commands(), ran, "nothing ran")

	// A unit that would set what sluice sets, or give one argument two
	// values, is invalid at sync.
	b.Commit(t, "bad units", map[string]string{
		"infra/path.json": strings.Replace(loginJSON(`,"PATH":"/tmp"`), `"login"`, `"path"`, 1),
		"infra/tf.json":   strings.Replace(loginJSON(`,"TF_LOG":"trace"`), `"login"`, `"tf"`, 1),
		"infra/both.json": strings.Replace(strings.Replace(loginJSON(""), `"user":"alice"`, `"user":"alice","password":"x"`, 1), `"login"`, `"both"`, 1),
	})
	res, err := b.gitops.RequestSync(b.ctx, "alice", false)
	require.NoError(t, err)
	syncRun := b.wait(t, res.Run.ID)
	require.Equal(t, journal.StateSucceeded, syncRun.State, "sync: %v", syncRun.Error)
	var synced struct{ Invalid []unit.Invalid }
	require.NoError(t, json.Unmarshal(syncRun.Result, &synced))
	invalid := map[string]string{}
	for _, iv := range synced.Invalid {
		invalid[iv.Path] = iv.Reason
	}
	require.Contains(t, invalid["infra/path.json"], "has env PATH, which sluice sets itself")
	require.Contains(t, invalid["infra/tf.json"], "has env TF_LOG; names starting with TF_ configure terraform itself")
	require.Contains(t, invalid["infra/both.json"], `has "password" both in "inputs" and in "vars"`)

	// No value, in any form, in the journal, River, the units, the logs,
	// or any file under the working trees and the data dir.
	var dump bytes.Buffer
	dump.WriteString(dbtest.Rows(t, b.pool, "journal_run", "journal_event", "river_job", "unit"))
	require.Contains(t, dump.String(), "db-password", "the scan reads nothing")
	require.Contains(t, dump.String(), "(sensitive value)", "the scan reads nothing")
	logs := b.logs.String()
	dump.WriteString(logs)
	require.NotEmpty(t, logs, "the log is empty")
	t.Logf("scanned %d bytes of logs", len(logs))
	files := 0
	require.NoError(t, filepath.WalkDir(filepath.Dir(b.configRoot), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		files++
		dump.Write(data)
		if zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data))); err == nil {
			for _, f := range zr.File {
				rc, err := f.Open()
				require.NoError(t, err)
				member, err := io.ReadAll(rc)
				rc.Close()
				require.NoError(t, err)
				dump.Write(member)
			}
		}
		return nil
	}))
	require.Greater(t, files, 10, "the scan reads the roots")
	require.FileExists(t, filepath.Join(b.configRoot, "archive", "infra", "login", "main.tf.json"))
	for _, v := range [][]byte{first, second, token} {
		for _, form := range []string{string(v[:15]), base64.StdEncoding.EncodeToString(v), hex.EncodeToString(v)} {
			require.NotContains(t, dump.String(), form)
		}
	}
}

func (b *testBundle) events(t *testing.T, id uuid.UUID) string {
	t.Helper()
	evs, err := b.journal.Events(b.ctx, id, 0, 1000)
	require.NoError(t, err)
	var msgs []string
	for _, e := range evs {
		msgs = append(msgs, e.Message)
	}
	return strings.Join(msgs, "\n")
}
