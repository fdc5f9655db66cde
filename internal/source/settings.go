package source

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/redact"
	"sluice/internal/unit"
)

// DefaultInterval is the sync interval when a repository is configured and
// no interval is given.
const DefaultInterval = 600

// Settings are the GitOps settings as operators see them.
type Settings struct {
	// RepoURL is the repository with any credentials masked.
	RepoURL         string
	Branch          string
	Path            string
	SyncIntervalSec int
	// JournalID is the receipt of the change that answered these
	// settings; zero when they were read.
	JournalID uuid.UUID
}

// SettingsInput changes the settings. RepoURL may carry credentials in its
// userinfo; sending back the masked URL keeps the stored ones.
type SettingsInput struct {
	RepoURL         string
	Branch          string
	Path            string
	SyncIntervalSec int
	// Token is an HTTPS token (SLUICE_GITOPS_TOKEN); "" keeps the stored one.
	Token string
	// WebhookSecret authenticates the source's push webhooks
	// (ReadDelivery): nil keeps the stored one, "" removes it. It is
	// stored sealed and never shown back.
	WebhookSecret *string
}

// credentials are what a repository URL carried, kept out of the URL.
type credentials struct {
	username, password string
	// userOnly is true when the URL's user part stood alone
	// (https://TOKEN@host): password holds it, as the token.
	userOnly bool
}

// splitURL separates credentials from a repository URL. Local paths and
// scp-like ssh addresses (git@host:repo) pass through unchanged.
func splitURL(raw string) (string, credentials, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", credentials{}, errs.Errorf(errs.Invalid, "The repository URL is empty.")
	}
	if !strings.Contains(raw, "://") {
		return localURL(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", credentials{}, errs.Errorf(errs.Invalid, "The repository URL %q cannot be parsed.", redact.String(raw))
	}
	switch u.Scheme {
	case "https", "http", "ssh", "git", "file":
	default:
		return "", credentials{}, errs.Errorf(errs.Invalid, "The repository URL must use https, http, ssh, git or file, not %q.", u.Scheme)
	}
	var c credentials
	if u.User != nil {
		c.username = u.User.Username()
		c.password, _ = u.User.Password()
		switch {
		case c.password != "":
		case u.Scheme == "ssh":
			// An SSH login name (ssh://git@host) is no secret, and ssh needs it.
			return u.String(), credentials{}, nil
		case u.Scheme == "https" || u.Scheme == "http":
			// https://TOKEN@host: the user part is the secret.
			c = credentials{username: "x-access-token", password: c.username, userOnly: true}
		default:
			// file:// and git:// send no credentials: a user name alone
			// is neither used nor a secret.
			c = credentials{}
		}
		u.User = nil
	}
	return u.String(), c, nil
}

// MaskedURL is how a stored source's URL is shown: with "***@" where
// credentials are stored.
func MaskedURL(src *db.Source) string {
	if len(src.RepoPasswordSealed) == 0 {
		return src.RepoUrl
	}
	if i := strings.Index(src.RepoUrl, "://"); i >= 0 {
		return src.RepoUrl[:i+3] + redact.Mask + "@" + src.RepoUrl[i+3:]
	}
	return src.RepoUrl
}

// Remote opens src's credentials and rebuilds the URL with them for the
// Git client: a URL, and a token when the credentials are one.
func (s *Service) Remote(src *db.Source) (repoURL, token string, err error) {
	secret, err := s.openSecret(src)
	if err != nil || secret == "" {
		return src.RepoUrl, "", err
	}
	user := ""
	if src.RepoUsername != nil {
		user = *src.RepoUsername
	}
	if user == "" || user == "x-access-token" {
		return src.RepoUrl, secret, nil
	}
	u, err := url.Parse(src.RepoUrl)
	if err != nil {
		return src.RepoUrl, secret, nil
	}
	u.User = url.UserPassword(user, secret)
	return u.String(), "", nil
}

// SettingsOf is src's settings as operators see them.
func SettingsOf(src *db.Source) *Settings {
	return &Settings{RepoURL: MaskedURL(src), Branch: src.Branch, Path: src.Path, SyncIntervalSec: int(src.SyncIntervalSec)}
}

func validateBranch(b string) error {
	if b == "" || strings.ContainsAny(b, " ~^:?*[\\") || strings.Contains(b, "..") ||
		strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock") ||
		// What gitsync refuses at every sync is refused here, when it is set.
		strings.HasPrefix(b, "-") || plumbing.NewBranchReferenceName(b).Validate() != nil {
		return errs.Errorf(errs.Invalid, "Branch %q is not a valid Git branch name.", b)
	}
	return nil
}

// normalizeInput checks an input and splits its credentials.
func normalizeInput(in SettingsInput) (SettingsInput, credentials, error) {
	if in.Branch == "" {
		in.Branch = "main"
	}
	if err := validateBranch(in.Branch); err != nil {
		return in, credentials{}, err
	}
	p, err := unit.ValidatePrefix(in.Path)
	if err != nil {
		return in, credentials{}, errs.Errorf(errs.Invalid, "The path %q is not allowed: %s", in.Path, err.Error())
	}
	in.Path = p
	if in.WebhookSecret != nil {
		if err := validateWebhookSecret(*in.WebhookSecret); err != nil {
			return in, credentials{}, err
		}
	}
	if in.SyncIntervalSec < 0 {
		return in, credentials{}, errs.Errorf(errs.Invalid, "syncIntervalSec must be 0 (manual only) or more.")
	}
	if strings.Contains(in.RepoURL, redact.Mask+"@") {
		// The masked URL sent back: credentials stay as stored.
		in.RepoURL = strings.Replace(in.RepoURL, redact.Mask+"@", "", 1)
		return in, credentials{username: keepMarker}, nil
	}
	cleanURL, creds, err := splitURL(in.RepoURL)
	if err != nil {
		return in, credentials{}, err
	}
	if in.Token != "" {
		switch {
		case creds.userOnly:
			// https://deployer@host and a token: the user part is the user
			// name the token goes with, as gitsync.Remote takes them.
			creds = credentials{username: creds.password, password: in.Token}
		case creds.password != "":
			return in, credentials{}, errs.Errorf(errs.Invalid, "The repository URL carries a password and a token is given too, so one of them would be ignored; drop the password from the URL, or drop the token.")
		}
	}
	in.RepoURL = cleanURL
	return in, creds, nil
}

// scpLike is Git's user@host:path form of an SSH URL.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^:]`)

// localURL checks a repository given without "://": git@host:repo, or an
// absolute local path. Git's transport::address form (ext::, fd::) runs
// programs or reads descriptors and is refused; so is a relative path,
// which would be resolved against serve's working directory, and a
// control character anywhere.
func localURL(raw string) (string, credentials, error) {
	for _, r := range raw {
		if r < 0x20 || r == 0x7f {
			return "", credentials{}, errs.Errorf(errs.Invalid, "The repository %q holds a control character.", redact.String(raw))
		}
	}
	if !utf8.ValidString(raw) {
		return "", credentials{}, errs.Errorf(errs.Invalid, "The repository path is not valid UTF-8.")
	}
	switch {
	case scpLike.MatchString(raw):
		return raw, credentials{}, nil
	case strings.Contains(raw, "::"):
		return "", credentials{}, errs.Errorf(errs.Invalid, "The repository %q uses Git's transport::address form, which sluice does not take: give an https, ssh, git or file URL, or an absolute path.", redact.String(raw))
	case !filepath.IsAbs(raw):
		return "", credentials{}, errs.Errorf(errs.Invalid, "The repository path %q is relative, and would be resolved against serve's working directory: give an absolute path (or a file:// URL).", redact.String(raw))
	}
	return filepath.Clean(raw), credentials{}, nil
}

// keepMarker in credentials.username means "keep what is stored".
const keepMarker = "\x00keep"

// GetSettings returns the settings, or nil when no repository is configured.
func (s *Service) GetSettings(ctx context.Context) (*Settings, error) {
	src, err := db.New(s.Pool).SourceGetByName(ctx, DefaultName)
	if errors.Is(err, pgx.ErrNoRows) {
		return &Settings{Branch: "main", SyncIntervalSec: 0}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get settings: %w", err)
	}
	return SettingsOf(src), nil
}

// PutSettings stores new settings; they are in force for the next sync and
// the next tick. A change of repository, branch or path makes the next sync
// a full one. by is who asks.
func (s *Service) PutSettings(ctx context.Context, in SettingsInput, by string) (*Settings, error) {
	in, creds, err := normalizeInput(in)
	if err != nil {
		return nil, err
	}
	var (
		out *db.Source
		run *db.JournalRun
	)
	err = db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		cur, err := q.SourceGetByNameForUpdate(ctx, DefaultName)
		if errors.Is(err, pgx.ErrNoRows) {
			cur = nil
		} else if err != nil {
			return err
		}
		if out, err = s.storeSettingsTx(ctx, q, cur, DefaultID, DefaultName, in, creds); err != nil {
			return err
		}
		run, err = s.recordTx(ctx, tx, ActionPutSettings, by, cur, out, "GitOps settings stored")
		return err
	})
	if err != nil {
		return nil, err
	}
	st := SettingsOf(out)
	st.JournalID = run.ID
	return st, nil
}

// storeSettingsTx writes normalized settings: onto cur, or into a new
// source with id and name when cur is nil. It decides which credentials the
// source keeps.
func (s *Service) storeSettingsTx(ctx context.Context, q *db.Queries, cur *db.Source, id uuid.UUID, name string, in SettingsInput, creds credentials) (*db.Source, error) {
	var user, pass *string
	// sealed is what the row keeps: the stored value as it is (the same row,
	// so it still opens), or pass sealed below.
	var sealed []byte
	switch {
	case creds.username == keepMarker:
		if cur == nil || cur.RepoUrl != in.RepoURL {
			// Never send stored credentials to another repository.
			return nil, errs.Errorf(errs.Invalid, "The URL's masked credentials (%s) only stand for the stored ones of the same repository; send the credentials again.", redact.Mask)
		}
		user, sealed = cur.RepoUsername, cur.RepoPasswordSealed
	case creds.password != "":
		user, pass = &creds.username, &creds.password
	case in.Token != "":
		u := "x-access-token"
		user, pass = &u, &in.Token
	case cur != nil && cur.RepoUrl == in.RepoURL:
		// The same repository without credentials in the URL: keep a
		// stored token, so an interval change does not drop it.
		user, sealed = cur.RepoUsername, cur.RepoPasswordSealed
	}
	if pass != nil {
		s.Redactor.Add(*pass)
		var err error
		if sealed, err = s.seal(id, *pass); err != nil {
			return nil, err
		}
	}
	var out *db.Source
	var err error
	if cur == nil {
		out, err = q.SourceInsert(ctx, &db.SourceInsertParams{
			ID: id, Name: name, RepoUrl: in.RepoURL, RepoUsername: user,
			RepoPasswordSealed: sealed, Branch: in.Branch, Path: in.Path, SyncIntervalSec: int32(in.SyncIntervalSec),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			// ON CONFLICT DO NOTHING: a source that is not deleted has the name.
			return nil, errs.Errorf(errs.Conflict, "A source named %q exists; choose another name, or change that one with PUT /api/v1/sources/%s.", name, name)
		}
	} else {
		out, err = q.SourceUpdateSettings(ctx, &db.SourceUpdateSettingsParams{
			ID: cur.ID, RepoUrl: in.RepoURL, RepoUsername: user, RepoPasswordSealed: sealed,
			Branch: in.Branch, Path: in.Path, SyncIntervalSec: int32(in.SyncIntervalSec),
		})
	}
	if err != nil || in.WebhookSecret == nil {
		return out, err
	}
	return s.setWebhookSecretTx(ctx, q, out.ID, *in.WebhookSecret)
}

// Seed stores the environment's settings on first start; later starts keep
// the stored settings, which the API may have changed. A webhook secret in
// in (SLUICE_GITOPS_WEBHOOK_SECRET) is put on the default source at every
// start. It first runs SealCredentials.
func (s *Service) Seed(ctx context.Context, in SettingsInput, intervalSet bool) error {
	// Stored credentials, of every source, need sealing with the current
	// key and masking from the start, before any sync uses them.
	if err := s.SealCredentials(ctx); err != nil {
		return err
	}
	if err := s.seedSettings(ctx, in, intervalSet); err != nil {
		return err
	}
	if in.WebhookSecret == nil || *in.WebhookSecret == "" {
		return nil
	}
	return s.seedWebhookSecret(ctx, *in.WebhookSecret)
}

func (s *Service) seedSettings(ctx context.Context, in SettingsInput, intervalSet bool) error {
	if in.RepoURL == "" {
		return nil
	}
	if !intervalSet {
		in.SyncIntervalSec = DefaultInterval
	}
	_, err := db.New(s.Pool).SourceGetByName(ctx, DefaultName)
	if err == nil {
		return nil // stored settings win
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	_, err = s.PutSettings(ctx, in, BySystem)
	return err
}
