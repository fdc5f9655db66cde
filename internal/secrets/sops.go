package secrets

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/sops"
)

// SOPSIdentity is the secret that holds the age identities SOPS files in
// Git are decrypted with: what `age-keygen` writes (comment lines and one or
// more AGE-SECRET-KEY-… lines), set like any secret, globally or for one
// source, and sealed like any.
const SOPSIdentity = "sops-age-key"

// DecryptSOPS decrypts the SOPS file name (its bytes data) of source
// sourceID's repository with the identities of SOPSIdentity as a unit of
// that source sees it, checks its MAC, and returns its top-level values,
// each registered with the redactor, and the identity secret's Ref. No
// error holds a value or an identity.
func (s *Service) DecryptSOPS(ctx context.Context, q db.DBTX, sourceID uuid.UUID, name string, data []byte) (map[string]string, Ref, error) {
	ref, keys, err := s.Resolve(ctx, q, sourceID, SOPSIdentity)
	if errs.Is(err, errs.NotFound) {
		return nil, Ref{}, errs.Errorf(errs.NotFound,
			"no age identity is set to decrypt SOPS files: set secret %s to age-keygen's output (`sluice secret set %s --from-file KEY`), for the source or globally", SOPSIdentity, SOPSIdentity)
	}
	if err != nil {
		return nil, Ref{}, err
	}
	ids, err := parseIdentities(string(keys))
	if err != nil {
		return nil, Ref{}, errs.Errorf(errs.Invalid, "secret %s (version %d) %s", SOPSIdentity, ref.Version, err)
	}
	for _, id := range ids {
		s.redactor().Add(id.Secret())
	}
	values, err := sops.Decrypt(name, data, ids)
	if err != nil {
		return nil, Ref{}, errs.Errorf(errs.Invalid, "%s", strings.TrimSuffix(err.Error(), "."))
	}
	for _, v := range values {
		s.redactor().Add(v)
	}
	return values, ref, nil
}

// parseIdentities reads an age identity file: blank and # lines skipped,
// every other line an identity. Its error never quotes the text.
func parseIdentities(text string) ([]sops.Identity, error) {
	var ids []sops.Identity
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, err := sops.ParseIdentity(line)
		if err != nil {
			return nil, fmt.Errorf("does not read as age identities: line %d: %v", i+1, err)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("holds no age identity (an AGE-SECRET-KEY-… line, as age-keygen writes it)")
	}
	return ids, nil
}
