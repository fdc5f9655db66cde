package services

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/artifact"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/imageref"
	"sluice/internal/servicespec"
)

// ResolveImageTx is resolveTx for a unit of another kind whose spec holds
// a service's (a Blueprint's template): the resolution its sync recorded
// for u's content.
func ResolveImageTx(ctx context.Context, q *db.Queries, u *db.Unit, spec *servicespec.Spec) error {
	return resolveTx(ctx, q, u, spec)
}

// PowersTx is powersTx for a unit of another kind whose spec holds a
// service's (a Blueprint's template, before a rollout is authorized).
func PowersTx(ctx context.Context, q *db.Queries, u *db.Unit, spec *servicespec.Spec) error {
	return powersTx(ctx, q, u, spec)
}

// powersTx refuses, as a Conflict, a container that asks for a power over
// its host that its source does not allow now: sync admitted it under the
// source's allowance then, and an admin may have taken it back since.
func powersTx(ctx context.Context, q *db.Queries, u *db.Unit, spec *servicespec.Spec) error {
	want := spec.Powers()
	if len(want) == 0 {
		return nil
	}
	src, err := q.SourceGet(ctx, u.SourceID)
	if err != nil {
		return fmt.Errorf("load the source of %s: %w", u.Name, err)
	}
	if err := servicespec.PowersRefused(want, src.ContainerPowers, src.Name); err != nil {
		return errs.Errorf(errs.Conflict, "%s %s %s; nothing was run.", kindWord(u.Kind), u.Name, err)
	}
	return nil
}

// kindWord names a unit's kind in a sentence.
func kindWord(kind string) string {
	if kind == servicespec.Kind {
		return "Service"
	}
	return kind
}

// resolveTx gives spec, parsed from unit u, what its sync found its image
// named in the registry when it accepted u's content (gitops'
// resolveImages): the digest of a tag, the images of an index. A tag
// without one is a Conflict, since nothing says what it would run; a digest
// without one (its registry was not reachable from the control plane) runs
// as pinned.
func resolveTx(ctx context.Context, q *db.Queries, u *db.Unit, spec *servicespec.Spec) error {
	if !spec.PullsOneImage() || spec.Resolved != nil {
		return nil
	}
	raw, err := q.ImageResolutionGet(ctx, &db.ImageResolutionGetParams{UnitID: u.ID, ContentHash: u.ContentHash})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if spec.Tagged() {
			return errs.Errorf(errs.Conflict, "Service %s names its image by tag (%s), and no sync has resolved it to a digest; sync its source (`sluice sync`), whose receipt says why if the registry cannot be read.", u.Name, spec.Image)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read the resolution of %s's image: %w", u.Name, err)
	}
	var res imageref.Resolution
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("read the resolution of %s's image: %w", u.Name, err)
	}
	spec.Resolve(&res)
	return nil
}

// staleTag reads again the tag spec's image names, when it names one: a
// tag that points elsewhere than the digest its sync resolved is stale
// evidence, a finding; what runs stays the digest resolved, until Git
// changes. note says what the check could not read, or that the tag holds.
func (s *Service) staleTag(ctx context.Context, u *db.Unit, spec *servicespec.Spec) (f *DriftFinding, note string) {
	if !spec.Tagged() || spec.Resolved == nil {
		return nil, ""
	}
	was := spec.Resolved
	var cred *imageref.Credentials
	if name := spec.PullSecret(); name != "" {
		if s.Secrets == nil {
			return nil, fmt.Sprintf("Tag %s was not read again: its pull secret %s cannot be opened without a secret key.", spec.Image, name)
		}
		_, val, err := s.Secrets.Resolve(ctx, s.Pool, u.SourceID, name)
		if err != nil {
			return nil, fmt.Sprintf("Tag %s was not read again: %v", spec.Image, err)
		}
		if cred, err = imageref.ParseCredentials(val); err != nil {
			return nil, fmt.Sprintf("Tag %s was not read again: pull secret %s: %v", spec.Image, name, err)
		}
	}
	r := s.Images
	if r == nil {
		r = &imageref.Resolver{}
	}
	now, err := r.Resolve(ctx, spec.Image, cred)
	if err != nil {
		return nil, fmt.Sprintf("Tag %s was not read again: %v.", spec.Image, err)
	}
	if now.Digest == was.Digest {
		return nil, fmt.Sprintf("Tag %s still points at %s, as when it was accepted.", spec.Image, was.Digest)
	}
	return &DriftFinding{
		Class: ClassSource,
		Fact:  fmt.Sprintf("Tag %s has moved since it was accepted: stale evidence.", spec.Image),
		Proof: fmt.Sprintf("The registry now answers %s; the sync that accepted the unit resolved it to %s at %s, and that digest is what sluice runs. A tag that moves changes nothing by itself: pin the new digest in Git, or deploy it.", now.Digest, was.Digest, was.ResolvedAt.Format(time.RFC3339)),
	}, ""
}

// composeImagePath is where a compose unit pins Compose service svc's
// image, the pin a deploy of svc moves.
func composeImagePath(svc string) []string { return []string{"spec", "compose", "images", svc} }

// deployPin checks the Compose service a deploy of service name asks to
// move (svc, "" when none) against spec: a Compose project has a pin per
// Compose service, so its deploy names the one it moves, and a service of
// another runtime has one pin and takes no name. It returns that Compose
// service's pin ("" for another runtime). A name the project does not pin
// is told apart, when spec's project has been read, as one its files do
// not declare or one they declare without a pin.
func deployPin(spec *servicespec.Spec, name, svc string) (string, error) {
	if spec.Runtime != servicespec.RuntimeCompose {
		if svc != "" {
			return "", errs.Errorf(errs.Conflict, "Service %s runs under the %s runtime, with one pin, and the deploy named Compose service %q: only a Compose project's deploy names the Compose service whose pin it moves. Leave composeService out (the CLI: no --compose-service).", name, spec.Runtime, svc)
		}
		return "", nil
	}
	var pinned []string
	if spec.Compose != nil {
		pinned = slices.Sorted(maps.Keys(spec.Compose.Images))
	}
	if len(pinned) == 0 {
		return "", errs.Errorf(errs.Conflict, "Service %s is a Compose project that pins no image in spec.compose.images, so a deploy has no pin to move. Pin its Compose services' images in Git first and converge (`sluice converge %s`).", name, name)
	}
	if svc == "" {
		return "", errs.Errorf(errs.Invalid, "Service %s is a Compose project, with a pin per Compose service: name the one whose pin the deploy moves, %s (composeService; the CLI: --compose-service %s).", name, orList(pinned), pinned[0])
	}
	if ref, ok := spec.Compose.Images[svc]; ok {
		return ref, nil
	}
	if p := spec.Project(); p != nil {
		if declared, err := p.Services(); err == nil && slices.Contains(declared, svc) {
			return "", errs.Errorf(errs.Conflict, "Compose service %s of %s has no pin in spec.compose.images, so a deploy has no pin to move. Pin it in Git first (\"images\": {%q: \"registry/repo@sha256:…\"}) and converge (`sluice converge %s`); the Compose services %s pins are %s.", svc, name, svc, name, name, andList(pinned))
		}
		return "", errs.Errorf(errs.Invalid, "The Compose project of %s declares no Compose service %q. A deploy moves the pin of one of the Compose services it pins: %s.", name, svc, orList(pinned))
	}
	return "", errs.Errorf(errs.Conflict, "Service %s pins no Compose service %q in spec.compose.images, so a deploy has no pin to move: it pins %s. If %s is one of its Compose services, pin it in Git first and converge.", name, svc, andList(pinned), svc)
}

// orList is "a", "a or b", "a, b or c".
func orList(words []string) string { return joinLast(words, " or ") }

// andList is "a", "a and b", "a, b and c".
func andList(words []string) string { return joinLast(words, " and ") }

func joinLast(words []string, last string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + last + words[len(words)-1]
}

// readProject reads a compose service's project from the commit in force of
// its source: its files, which make its digest (Spec.Digest) and its step.
func (s *Service) readProject(ctx context.Context, u *db.Unit, spec *servicespec.Spec) error {
	return ReadProject(ctx, s.GitOps, u, spec)
}

// ReadProject reads the Compose project of spec, unit u's (a service's, or
// a Blueprint's template), from the commit in force of u's source; nothing
// for another runtime, or a project already read.
func ReadProject(ctx context.Context, gops *gitops.Service, u *db.Unit, spec *servicespec.Spec) error {
	if spec.Runtime != servicespec.RuntimeCompose || spec.Project() != nil {
		return nil
	}
	src, err := db.New(gops.Pool).SourceGet(ctx, u.SourceID)
	if err != nil {
		return fmt.Errorf("load the source of %s: %w", u.Name, err)
	}
	if src.SyncedCommit == nil {
		return errs.Errorf(errs.Unavailable, "Source %s has no commit in force, so the Compose files of %s cannot be read; sync it.", src.Name, u.Name)
	}
	commit := *src.SyncedCommit
	_, err = spec.ReadProject(func(p string) ([]byte, error) {
		data, _, err := gops.ReadFileAt(ctx, u.SourceID, commit, p)
		return data, err
	})
	if err != nil {
		return errs.Errorf(cmp.Or(errs.CodeOf(err), errs.Invalid), "The Compose project of %s cannot be read at commit %s: %s. Fix its spec.compose in Git and sync.", u.Name, shortCommit(commit), strings.TrimSuffix(errs.MessageOf(err), "."))
	}
	return nil
}

// pinOf is the digest spec pins: its image's, or for a Compose project its
// Compose service svc's ("" when it pins none).
func pinOf(spec *servicespec.Spec, svc string) string {
	if svc == "" {
		return spec.Digest()
	}
	if spec.Runtime != servicespec.RuntimeCompose || spec.Compose == nil {
		return ""
	}
	d, _ := artifact.ParseDigest(spec.Compose.Images[svc])
	return d
}
