package auth

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"sluice/db"
	"sluice/internal/errs"
)

// Authenticator authenticates requests against one database, sharing work
// between requests that carry the same token at once: a storm of clicks
// makes one lookup per moment, not one per click. It never caches an answer
// past the lookup that made it, so a revoked token is refused by the next
// lookup that starts after the revocation committed.
type Authenticator struct {
	db      db.DBTX
	flights singleflight.Group

	mu      sync.Mutex
	touched map[[32]byte]time.Time // when this process last recorded a token's use
}

// NewAuthenticator returns an Authenticator on e.
func NewAuthenticator(e db.DBTX) *Authenticator {
	return &Authenticator{db: e, touched: map[[32]byte]time.Time{}}
}

// lookupTimeout bounds one shared lookup: past it, every request waiting on
// it answers 503, which a client may retry.
const lookupTimeout = 10 * time.Second

// touchEvery is how often a token's last use is recorded (APITokenTouch
// records it at most once a minute anyway; this saves the statement).
const touchEvery = time.Minute

// Authenticate is the package's Authenticate, with identical lookups in
// flight shared.
func (a *Authenticator) Authenticate(ctx context.Context, secret string) (*Token, error) {
	if secret == "" {
		return Authenticate(ctx, a.db, secret)
	}
	hash := Hash(secret)
	v, err, _ := a.flights.Do(string(hash), func() (any, error) {
		// One lookup answers every request waiting on it, so no single
		// request's cancellation may end it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		tok, err := lookup(ctx, a.db, hash)
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, errs.Errorf(errs.Unavailable, "The database did not answer the token lookup within %s; try again in a moment.", lookupTimeout)
		}
		if err != nil {
			return nil, err
		}
		var key [32]byte
		copy(key[:], hash)
		a.mu.Lock()
		due := time.Since(a.touched[key]) >= touchEvery
		if due {
			a.touched[key] = time.Now()
		}
		a.mu.Unlock()
		if due {
			_ = db.New(a.db).APITokenTouch(ctx, tok.ID) // best effort: a read must not fail on it
		}
		return tok, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Token), nil
}
