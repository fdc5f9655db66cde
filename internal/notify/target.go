package notify

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
)

// Target kinds.
const (
	KindHTTP  = "http"
	KindSlack = "slack"
)

// Secret bounds of an HTTP target, as a webhook secret's.
const (
	MinSecret = 16
	MaxSecret = 256
	MaxURL    = 2048
)

// Actions recorded on the journal.
const (
	ActionTargetCreate = "notification_target_create"
	ActionTargetDelete = "notification_target_delete"
	ActionTest         = "notification_test"
)

// Target is a notification target as the API shows it: never its URL's
// path or query, nor its secret.
type Target struct {
	ID   uuid.UUID
	Name string
	Kind string
	// Source is the name of the source whose runs it takes; "" for every run.
	Source string
	Events []string
	// URL is the URL's scheme and host, with "/…" when it has a path.
	URL       string
	SecretSet bool
	CreatedBy string
	CreatedAt time.Time
}

// TargetInput creates a target.
type TargetInput struct {
	Name string
	Kind string
	URL  string
	// Secret signs an HTTP target's bodies; a Slack target takes none (its
	// URL is its credential).
	Secret string
	// Source is a source's name or id; "" makes a global target.
	Source string
	// Events default to Events.
	Events []string
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func urlAD(id uuid.UUID) []byte {
	return []byte("sluice notification_target.url_sealed " + id.String())
}

func secretAD(id uuid.UUID) []byte {
	return []byte("sluice notification_target.secret_sealed " + id.String())
}

// displayURL is what the API shows of u: scheme and host, since a path or
// a query may hold a token (a Slack webhook's path does).
func displayURL(u *url.URL) string {
	s := u.Scheme + "://" + u.Host
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		s += "/…"
	}
	return s
}

func (in *TargetInput) validate(g *Guard) (*url.URL, error) {
	if !nameRE.MatchString(in.Name) {
		return nil, errs.Errorf(errs.Invalid, "A target name is 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit; %q is not.", in.Name)
	}
	if in.Kind != KindHTTP && in.Kind != KindSlack {
		return nil, errs.Errorf(errs.Invalid, "A target's kind is http or slack, not %q.", in.Kind)
	}
	if len(in.URL) > MaxURL {
		return nil, errs.Errorf(errs.Invalid, "A target URL has at most %d bytes.", MaxURL)
	}
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errs.Errorf(errs.Invalid, "A target URL is an absolute http or https URL, such as https://hooks.example.com/sluice.")
	}
	if u.User != nil {
		return nil, errs.Errorf(errs.Invalid, "A target URL takes no user name or password; an HTTP target's bodies are signed with its secret instead.")
	}
	if err := g.CheckHost(u.Hostname()); err != nil {
		return nil, errs.Errorf(errs.Invalid, "A target URL's host %s is refused: %s, as such a target could reach this server's own host or network (its database, its API, a cloud's metadata service).", u.Hostname(), err)
	}
	u.Fragment = ""
	switch in.Kind {
	case KindHTTP:
		if n := len(in.Secret); n < MinSecret || n > MaxSecret {
			return nil, errs.Errorf(errs.Invalid, "An http target needs a secret of %d to %d bytes to sign its bodies, not %d; `openssl rand -hex 32` makes one.", MinSecret, MaxSecret, n)
		}
	case KindSlack:
		if in.Secret != "" {
			return nil, errs.Errorf(errs.Invalid, "A slack target takes no secret: its webhook URL is its credential. Leave secret out.")
		}
	}
	if len(in.Events) == 0 {
		in.Events = slices.Clone(Events)
	}
	for _, e := range in.Events {
		if !slices.Contains(Events, e) {
			return nil, errs.Errorf(errs.Invalid, "Event %q is not one of %s.", e, strings.Join(Events, ", "))
		}
	}
	slices.Sort(in.Events)
	in.Events = slices.Compact(in.Events)
	return u, nil
}

func targetOut(t *db.NotificationTarget, source string) *Target {
	return &Target{
		ID: t.ID, Name: t.Name, Kind: t.Kind, Source: source, Events: t.Events, URL: t.UrlDisplay,
		SecretSet: len(t.SecretSealed) > 0, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt,
	}
}

// CreateTarget seals in's URL and secret and stores the target, with a
// receipt that names it (and neither of them).
func (s *Service) CreateTarget(ctx context.Context, in TargetInput, requestedBy string) (*Target, error) {
	u, err := in.validate(s.guard())
	if err != nil {
		return nil, err
	}
	if s.Secrets == nil {
		return nil, errs.Errorf(errs.Unavailable, "This server has no secret key, so it cannot store a target's URL and secret.")
	}
	full := u.String()
	s.redactor().Add(full, in.Secret)
	if in.Kind == KindSlack {
		s.redactor().Add(strings.TrimPrefix(u.Path, "/"))
	}
	id := uuid.New()
	urlSealed, err := s.Secrets.Seal([]byte(full), urlAD(id))
	if err != nil {
		return nil, fmt.Errorf("seal the URL of target %s: %w", in.Name, err)
	}
	var secretSealed []byte
	if in.Secret != "" {
		if secretSealed, err = s.Secrets.Seal([]byte(in.Secret), secretAD(id)); err != nil {
			return nil, fmt.Errorf("seal the secret of target %s: %w", in.Name, err)
		}
	}
	var out *Target
	err = db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		var sourceID *uuid.UUID
		var sourceName string
		if in.Source != "" {
			src, err := q.SourceFind(ctx, in.Source)
			if errors.Is(err, pgx.ErrNoRows) {
				return errs.Errorf(errs.NotFound, "Source %q does not exist; `sluice sources` lists them.", in.Source)
			}
			if err != nil {
				return fmt.Errorf("find source %s: %w", in.Source, err)
			}
			sourceID, sourceName = &src.ID, src.Name
		}
		t, err := q.NotificationTargetInsert(ctx, &db.NotificationTargetInsertParams{
			ID: id, Name: in.Name, Kind: in.Kind, SourceID: sourceID, Events: in.Events,
			UrlDisplay: displayURL(u), UrlSealed: urlSealed, SecretSealed: secretSealed, CreatedBy: requestedBy,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.Conflict, "A notification target named %s exists; delete it first, or choose another name.", in.Name)
		}
		if err != nil {
			return fmt.Errorf("insert target %s: %w", in.Name, err)
		}
		out = targetOut(t, sourceName)
		_, err = s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionTargetCreate, Target: t.Name, RequestedBy: requestedBy,
			Params:  &TargetParams{Kind: t.Kind, URL: t.UrlDisplay, Source: sourceName, Events: t.Events},
			Message: fmt.Sprintf("notification target %s created (%s, %s)", t.Name, t.Kind, t.UrlDisplay),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListTargets lists the targets by name.
func (s *Service) ListTargets(ctx context.Context) ([]*Target, error) {
	rows, err := db.New(s.Pool).NotificationTargetList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list notification targets: %w", err)
	}
	out := make([]*Target, 0, len(rows))
	for _, r := range rows {
		out = append(out, targetOut(&db.NotificationTarget{
			ID: r.ID, Name: r.Name, Kind: r.Kind, SourceID: r.SourceID, Events: r.Events, UrlDisplay: r.UrlDisplay,
			UrlSealed: r.UrlSealed, SecretSealed: r.SecretSealed, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt,
		}, r.SourceName))
	}
	return out, nil
}

// DeleteTarget deletes target name. Its deliveries stay, naming it; one
// still pending gives up when its job finds the target gone.
func (s *Service) DeleteTarget(ctx context.Context, name, requestedBy string) error {
	return db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		t, err := db.New(tx).NotificationTargetDelete(ctx, name)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "Notification target %s does not exist; `sluice notifications list` lists them.", name)
		}
		if err != nil {
			return fmt.Errorf("delete target %s: %w", name, err)
		}
		_, err = s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionTargetDelete, Target: t.Name, RequestedBy: requestedBy,
			Message: fmt.Sprintf("notification target %s deleted", t.Name),
		})
		return err
	})
}

// TestSend records a receipt for a test send to target name and queues its
// delivery, which is sent as any other (retried, then given up) but never
// deduplicated. It returns the receipt and the delivery.
func (s *Service) TestSend(ctx context.Context, name, requestedBy string) (*db.JournalRun, *db.NotificationDelivery, error) {
	var (
		run *db.JournalRun
		d   *db.NotificationDelivery
	)
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		row, err := q.NotificationTargetGetByName(ctx, name)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "Notification target %s does not exist; `sluice notifications list` lists them.", name)
		}
		if err != nil {
			return fmt.Errorf("find target %s: %w", name, err)
		}
		run, err = s.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionTest, Target: row.Name, RequestedBy: requestedBy,
			Message: fmt.Sprintf("test notification to %s queued", row.Name),
		})
		if err != nil {
			return err
		}
		t := &db.NotificationTarget{ID: row.ID, Name: row.Name, Kind: row.Kind}
		d, err = s.recordTx(ctx, tx, t, run, event{name: EventTest,
			reason: fmt.Sprintf("A test notification to target %s, asked for by %s: sluice can reach this target.", row.Name, requestedBy)})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return run, d, nil
}

// LoadSecrets opens every target's URL and secret and registers them with
// the redactor, so that no log line or error of this process shows them.
// One sealed with a previous key (a rotation) is sealed again with the
// current one. It returns how many it re-sealed.
func (s *Service) LoadSecrets(ctx context.Context) (int, error) {
	q := db.New(s.Pool)
	rows, err := q.NotificationTargetList(ctx)
	if err != nil {
		return 0, fmt.Errorf("list notification targets: %w", err)
	}
	resealed := 0
	for _, r := range rows {
		t := &db.NotificationTarget{ID: r.ID, Name: r.Name, Kind: r.Kind, UrlSealed: r.UrlSealed, SecretSealed: r.SecretSealed}
		target, secret, err := s.open(t)
		if err != nil {
			s.logger().Warn("a notification target's URL or secret does not open; sends to it give up", "target", r.Name, "err", s.redactor().Error(err))
			continue
		}
		if !s.Secrets.NeedsReseal(t.UrlSealed) && (len(t.SecretSealed) == 0 || !s.Secrets.NeedsReseal(t.SecretSealed)) {
			continue
		}
		p := &db.NotificationTargetResealParams{ID: t.ID}
		if p.UrlSealed, err = s.Secrets.Seal([]byte(target), urlAD(t.ID)); err != nil {
			return resealed, fmt.Errorf("seal the URL of target %s: %w", t.Name, err)
		}
		if secret != "" {
			if p.SecretSealed, err = s.Secrets.Seal([]byte(secret), secretAD(t.ID)); err != nil {
				return resealed, fmt.Errorf("seal the secret of target %s: %w", t.Name, err)
			}
		}
		if err := q.NotificationTargetReseal(ctx, p); err != nil {
			return resealed, fmt.Errorf("store the re-sealed URL of target %s: %w", t.Name, err)
		}
		resealed++
	}
	return resealed, nil
}

// open returns t's URL and secret, registered with the redactor.
func (s *Service) open(t *db.NotificationTarget) (target, secret string, err error) {
	if s.Secrets == nil {
		return "", "", errs.Errorf(errs.Unavailable, "This server has no secret key, so it cannot open target %s's URL.", t.Name)
	}
	u, err := s.Secrets.Open(t.UrlSealed, urlAD(t.ID))
	if err != nil {
		return "", "", fmt.Errorf("open the URL of target %s with %s: %w", t.Name, s.Secrets.Origin(), err)
	}
	target = string(u)
	s.redactor().Add(target)
	if pu, err := url.Parse(target); err == nil && t.Kind == KindSlack {
		s.redactor().Add(strings.TrimPrefix(pu.Path, "/"))
	}
	if len(t.SecretSealed) > 0 {
		sec, err := s.Secrets.Open(t.SecretSealed, secretAD(t.ID))
		if err != nil {
			return "", "", fmt.Errorf("open the secret of target %s with %s: %w", t.Name, s.Secrets.Origin(), err)
		}
		secret = string(sec)
		s.redactor().Add(secret)
	}
	return target, secret, nil
}
