// Package imageref reads what a container image reference names in its
// registry: the digest a tag points at now, and whether a digest is one
// image's manifest or an index of one per platform, with each platform's
// child. It reads manifests only, never layers, through
// go-containerregistry.
//
// A sync resolves a service's image once, when its content is accepted
// (Resolution), and the node's step runs the digest it resolved (For): a
// tag that moves later is stale evidence that a drift check reports, not
// something that changes what runs.
package imageref

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Resolution is what an image reference named in its registry when a sync
// read it.
type Resolution struct {
	// Ref is the reference as the unit writes it.
	Ref string `json:"ref"`
	// Repository is Ref's repository, as written ("registry/repo").
	Repository string `json:"repository"`
	// Tag is the tag Ref names, "" when it pins a digest: the evidence of
	// where Digest came from.
	Tag string `json:"tag,omitempty"`
	// Digest is the manifest or index Ref named: its pin, or what its tag
	// pointed at.
	Digest string `json:"digest"`
	// Index says Digest is an image index (a manifest list): Platforms
	// lists its images.
	Index bool `json:"index,omitempty"`
	// Platforms are an index's images, one per platform, in the index's
	// order.
	Platforms []Platform `json:"platforms,omitempty"`
	// ResolvedAt is when the registry was read.
	ResolvedAt time.Time `json:"resolvedAt"`
}

// Platform is one image of an index.
type Platform struct {
	// Platform is "os/architecture", with "/variant" when the index gives
	// one ("linux/arm/v7").
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
}

// Pinned is the reference that runs: the repository at Digest.
func (r *Resolution) Pinned() string { return r.Repository + "@" + r.Digest }

// For is the digest a node of platform (as Current gives it) runs: Digest
// for one image, the child of the node's platform for an index. An index
// without it is refused with a sentence that lists what it has.
func (r *Resolution) For(platform string) (string, error) {
	if !r.Index {
		return r.Digest, nil
	}
	os, arch, variant := splitPlatform(platform)
	var fallback string
	for _, p := range r.Platforms {
		o, a, v := splitPlatform(p.Platform)
		if o != os || a != arch {
			continue
		}
		if v == variant {
			return p.Digest, nil
		}
		if (variant == "" || v == "") && fallback == "" {
			fallback = p.Digest
		}
	}
	if fallback != "" {
		return fallback, nil
	}
	have := make([]string, 0, len(r.Platforms))
	for _, p := range r.Platforms {
		have = append(have, p.Platform)
	}
	return "", fmt.Errorf("image %s is an index of %s, without an image for %s", r.Pinned(), strings.Join(have, ", "), platform)
}

func splitPlatform(p string) (os, arch, variant string) {
	os, rest, _ := strings.Cut(p, "/")
	arch, variant, _ = strings.Cut(rest, "/")
	return os, arch, variant
}

// Credentials are a registry's user and password; nil reads anonymously.
type Credentials struct {
	Username, Password string
}

// String never shows the password.
func (c Credentials) String() string { return c.Username + ":***" }

// ParseCredentials reads "user:password", as a pull secret holds them.
func ParseCredentials(b []byte) (*Credentials, error) {
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok || user == "" {
		return nil, errors.New(`the pull secret is not "user:password"`)
	}
	return &Credentials{Username: user, Password: pass}, nil
}

// Resolver reads references from their registries.
type Resolver struct {
	// Transport reaches the registries; nil is http.DefaultTransport.
	Transport http.RoundTripper
	// Timeout bounds one Resolve; 0 is 20 seconds.
	Timeout time.Duration
	// Now is the clock of ResolvedAt; nil is time.Now.
	Now func() time.Time
}

// IsTag reports whether ref names an image by tag (or by neither tag nor
// digest, which is the tag latest) rather than pins a digest, with a
// repository ("registry/repo@sha256:…") or without ("sha256:…").
func IsTag(ref string) bool {
	return !strings.Contains(ref, "@") && !strings.HasPrefix(ref, "sha256:")
}

// Resolve reads what ref names now. Its errors are sentences without the
// credentials; an unreachable registry, a refused login and an unknown
// manifest each say so.
func (r *Resolver) Resolve(ctx context.Context, ref string, cred *Credentials) (*Resolution, error) {
	parsed, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		if IsTag(ref) {
			// Without a tag, StrictValidation refuses an implied latest.
			return nil, fmt.Errorf("%q is not an image reference with a tag or a digest (registry/repo:tag or registry/repo@sha256:…): %v", ref, err)
		}
		return nil, fmt.Errorf("%q is not an image reference: %v", ref, err)
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := []remote.Option{remote.WithContext(ctx), remote.WithUserAgent("sluice")}
	if r.Transport != nil {
		opts = append(opts, remote.WithTransport(r.Transport))
	}
	if cred != nil {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: cred.Username, Password: cred.Password}))
	}
	desc, err := remote.Get(parsed, opts...)
	if err != nil {
		return nil, describe(ref, cred, err)
	}
	res := &Resolution{
		Ref:        ref,
		Repository: repository(ref),
		Digest:     desc.Digest.String(),
		Index:      desc.MediaType.IsIndex(),
		ResolvedAt: time.Now().UTC(),
	}
	if r.Now != nil {
		res.ResolvedAt = r.Now().UTC()
	}
	if t, ok := parsed.(name.Tag); ok {
		res.Tag = t.TagStr()
	} else if d := parsed.(name.Digest).DigestStr(); d != res.Digest {
		return nil, fmt.Errorf("the registry answered %s for %s", res.Digest, ref)
	}
	if !res.Index {
		if !desc.MediaType.IsImage() {
			return nil, fmt.Errorf("%s names a %s, which is neither an image nor an index of images", ref, desc.MediaType)
		}
		return res, nil
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, describe(ref, cred, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, describe(ref, cred, err)
	}
	for _, c := range m.Manifests {
		if c.Platform == nil || !c.MediaType.IsImage() {
			continue // an attestation, or a nested index: nothing a node runs
		}
		res.Platforms = append(res.Platforms, Platform{Platform: platformString(c.Platform), Digest: c.Digest.String()})
	}
	if len(res.Platforms) == 0 {
		return nil, fmt.Errorf("%s is an index that names no image for a platform", ref)
	}
	return res, nil
}

func platformString(p *v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// repository is ref without its tag or digest, as written.
func repository(ref string) string {
	if repo, _, ok := strings.Cut(ref, "@"); ok {
		return repo
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// Repository is ref without its tag or digest, as written.
func Repository(ref string) string { return repository(ref) }

// describe makes a registry's error a sentence that says what to do.
func describe(ref string, cred *Credentials, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			if cred == nil {
				return fmt.Errorf("the registry of %s refused to answer without credentials (HTTP %d); give the service a pullSecret", ref, te.StatusCode)
			}
			return fmt.Errorf("the registry of %s refused the pull secret's credentials for user %s (HTTP %d)", ref, cred.Username, te.StatusCode)
		case te.StatusCode == http.StatusNotFound || slices.ContainsFunc(te.Errors, func(d transport.Diagnostic) bool {
			return d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode
		}):
			return fmt.Errorf("the registry has no manifest for %s", ref)
		}
		return fmt.Errorf("the registry of %s answered HTTP %d", ref, te.StatusCode)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the registry of %s did not answer in time", ref)
	}
	return fmt.Errorf("could not read %s from its registry: %v", ref, err)
}

// Current is the platform of this process's machine as an index names it:
// "linux/amd64", "linux/arm64/v8", "linux/arm/v7".
func Current(goos, goarch, goarm string) string {
	switch goarch {
	case "arm64":
		return goos + "/arm64/v8"
	case "arm":
		if goarm != "" {
			return goos + "/arm/v" + strings.TrimSuffix(goarm, ",softfloat")
		}
	}
	return goos + "/" + goarch
}
