package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/imageref"
	"sluice/internal/journal"
	"sluice/internal/servicespec"
	"sluice/internal/unit"
)

// resolveAtOnce is how many registries a sync reads at once, and
// resolveTimeout how long it waits for one: an unreachable registry
// delays a sync of new content by that much, once.
const (
	resolveAtOnce  = 8
	resolveTimeout = 10 * time.Second
)

// resolveImages reads, for each container service among units whose engine
// pulls its image from a registry, what the image names there: a tag's
// digest, with the tag as evidence, and an index's image per platform. A
// resolution is made once for a unit's content and kept (image_resolution):
// the next sync of the same content runs the digest resolved the first
// time, and a tag that moves since is stale evidence (a drift check says
// so), never a silent change of what runs.
//
// A tag that cannot be resolved moves its unit to invalid with the reason:
// nothing would say what it runs. A digest whose registry cannot be read is
// accepted, with a warning: the pin is what runs, and the node's engine
// picks an index's image for its platform unrecorded.
func (s *Service) resolveImages(ctx context.Context, p *journal.Progress, src *db.Source, units []*unit.Unit, invalid []unit.Invalid, pulled map[string]*servicespec.Spec) ([]*unit.Unit, []unit.Invalid, error) {
	if len(pulled) == 0 {
		return units, invalid, nil
	}
	type pending struct {
		u    *unit.Unit
		spec *servicespec.Spec
	}
	var todo []pending
	for _, u := range units { // those checkSecretRefs and checkSOPSRefs kept
		if spec := pulled[u.Path]; spec != nil {
			todo = append(todo, pending{u, spec})
		}
	}
	if len(todo) == 0 {
		return units, invalid, nil
	}
	ids, hashes := make([]uuid.UUID, len(todo)), make([]string, len(todo))
	for i, t := range todo {
		ids[i], hashes[i] = t.u.ID, t.u.Hash
	}
	held, err := db.New(s.Pool).ImageResolutionList(ctx, &db.ImageResolutionListParams{UnitIds: ids, ContentHashes: hashes})
	if err != nil {
		return nil, nil, fmt.Errorf("read the images' resolutions: %w", err)
	}
	have := make(map[uuid.UUID]string, len(held))
	for _, h := range held {
		have[h.UnitID] = h.ContentHash
	}
	resolver := s.Images
	if resolver == nil {
		resolver = &imageref.Resolver{Timeout: resolveTimeout}
	}
	// The registries are read beside each other, a few at a time: a sync
	// of many new services waits for the slowest registry, not their sum.
	type answer struct {
		res *imageref.Resolution
		err error
	}
	answers := make([]answer, len(todo))
	var wg sync.WaitGroup
	slots := make(chan struct{}, resolveAtOnce)
	for i, t := range todo {
		if have[t.u.ID] == t.u.Hash {
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			res, err := s.resolveImage(ctx, resolver, src, t.spec)
			answers[i] = answer{res, err}
		}()
	}
	wg.Wait()
	refused := map[string]string{}
	for i, t := range todo {
		res, err := answers[i].res, answers[i].err
		if res == nil && err == nil {
			continue // held from an earlier sync of this content
		}
		if err != nil {
			if t.spec.Tagged() {
				refused[t.u.Path] = fmt.Sprintf(`has "spec.image" %q, a tag that sluice resolves when it accepts the unit, and %v; pin a digest (registry/repo@sha256:…), or sync again once the registry answers`, t.spec.Image, err)
			} else {
				p.Warn(ctx, fmt.Sprintf("%s %s: %v; its pin %s is accepted as it is, and a node's engine picks the image of an index for its platform without a record of which", kindWord(t.u.Kind), t.u.Name, err, t.spec.Image), nil)
			}
			continue
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, nil, err
		}
		if err := db.New(s.Pool).ImageResolutionPut(ctx, &db.ImageResolutionPutParams{UnitID: t.u.ID, ContentHash: t.u.Hash, Resolution: b}); err != nil {
			return nil, nil, fmt.Errorf("record the resolution of %s: %w", t.spec.Image, err)
		}
		switch {
		case res.Tag != "":
			p.Info(ctx, fmt.Sprintf("service %s: tag %s resolved to %s", t.u.Name, t.spec.Image, res.Digest), nil)
		case res.Index:
			p.Info(ctx, fmt.Sprintf("%s %s: %s is an index of %d platforms", kindWord(t.u.Kind), t.u.Name, t.spec.Image, len(res.Platforms)), nil)
		}
	}
	if len(refused) == 0 {
		return units, invalid, nil
	}
	kept := units[:0:0]
	for _, u := range units {
		if why, ok := refused[u.Path]; ok {
			invalid = append(invalid, unit.Invalid{Path: u.Path, Reason: why})
			continue
		}
		kept = append(kept, u)
	}
	return kept, invalid, nil
}

// resolveImage reads spec's image from its registry, with the service's
// pull secret when it names one.
func (s *Service) resolveImage(ctx context.Context, r *imageref.Resolver, src *db.Source, spec *servicespec.Spec) (*imageref.Resolution, error) {
	var cred *imageref.Credentials
	if name := spec.PullSecret(); name != "" {
		if s.Secrets == nil {
			return nil, fmt.Errorf("its pull secret %s cannot be opened: this control plane has no secret key", name)
		}
		_, val, err := s.Secrets.Resolve(ctx, s.Pool, src.ID, name)
		if err != nil {
			return nil, fmt.Errorf("its pull secret cannot be opened: %v", err)
		}
		if cred, err = imageref.ParseCredentials(val); err != nil {
			return nil, fmt.Errorf("pull secret %s: %v", name, err)
		}
	}
	return r.Resolve(ctx, spec.Image, cred)
}

// kindWord names a unit's kind in a sentence.
func kindWord(kind string) string {
	if kind == servicespec.Kind {
		return "service"
	}
	return kind
}
