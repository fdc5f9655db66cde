package servicespec

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"

	"sluice/internal/imageref"
)

// Tagged reports whether a container service names its image by tag
// ("registry/repo:v1") rather than pins a digest: the sync that accepts it
// resolves the tag (imageref) and records the digest, which is what runs.
func (s *Spec) Tagged() bool {
	return s.PullsOneImage() && imageref.IsTag(s.Image)
}

// Resolve records what the image named in its registry when the unit's
// content was accepted: Digest is then the digest resolved, and
// PulledImage the repository at it. res must be the resolution of
// s.Image.
func (s *Spec) Resolve(res *imageref.Resolution) {
	s.Resolved = res
}

// PulledImage is the image the engine pulls, by digest: the pin as
// written, or for a tag the repository at the digest it resolved to ("" if
// it has not been resolved).
func (s *Spec) PulledImage() string {
	switch {
	case s.Resolved != nil:
		return s.Resolved.Pinned()
	case s.Tagged():
		return ""
	}
	return s.Image
}

// checkTag checks an image named by tag: a container service's, pulled
// from its registry; anything else must pin a digest.
func (s *Spec) checkTag() error {
	if s.Runtime != RuntimeContainer || s.Archived() {
		return fmt.Errorf(`has "spec.image" %q that is not a digest pin; give sha256:<64 hex> or name@sha256:<64 hex>`, s.Image)
	}
	if _, err := name.NewTag(s.Image, name.StrictValidation); err != nil {
		return fmt.Errorf(`has "spec.image" %q, which is neither an image by digest (registry/repo@sha256:<64 hex>) nor by tag (registry/repo:tag): %v`, s.Image, err)
	}
	return nil
}
