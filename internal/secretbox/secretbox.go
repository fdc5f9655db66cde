// Package secretbox seals the few secrets sluice keeps in PostgreSQL (a Git
// repository's password or token) with a key that lives outside the
// database, so that a dump or a copy of the database shows none of them.
//
// A sealed value is AES-256-GCM from the standard library:
//
//	version (1 byte, 1) | key id (4 bytes) | nonce (12 random bytes) | ciphertext and tag
//
// The key id is the first four bytes of SHA-256 of a fixed label and the
// key: it tells which key sealed a value, so that a value sealed with a
// previous key can be re-sealed (rotation) and a value sealed with an
// unknown key is named as such, not as damage. The version byte and the key
// id are authenticated together with the caller's associated data, which
// binds a value to its place (sluice passes the row's id): a value copied to
// another row does not open there.
//
// A random 96-bit nonce is safe for far more values than one key ever seals
// here (the bound is about 2^32 per key).
package secretbox

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Version is the first byte of every value Seal returns.
const Version byte = 1

const (
	idLen     = 4
	nonceLen  = 12
	headerLen = 1 + idLen
	// Overhead is how many bytes sealing adds to a secret.
	Overhead = headerLen + nonceLen + 16
)

var (
	// ErrUnknownKey means the value was sealed with a key that is neither
	// the box's key nor one of its previous keys.
	ErrUnknownKey = errors.New("sealed with an unknown key")
	// ErrAuth means the value names one of the box's keys but does not open
	// with it: it was changed, or moved from the place its associated data
	// names.
	ErrAuth = errors.New("does not authenticate")
	// ErrFormat means the value is not one Seal made: too short, or of
	// another version.
	ErrFormat = errors.New("not a sealed value")
)

// Opts configures New.
type Opts struct {
	// Key seals, and opens what it sealed. Required.
	Key Key
	// Previous are keys that still open values during a rotation; they never
	// seal. Empty when no rotation is under way.
	Previous []Key
	// Origin says where Key comes from, for the operator (for example "the
	// key file /var/lib/sluice/secret.key"); errors of callers name it.
	// Never the key itself. Default "the secret key".
	Origin string
}

// Box seals and opens values. It is safe for concurrent use.
type Box struct {
	current  keyed
	previous []keyed
	origin   string
}

type keyed struct {
	id   [idLen]byte
	aead cipher.AEAD
}

func newKeyed(k Key) (keyed, error) {
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return keyed{}, fmt.Errorf("aes: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return keyed{}, fmt.Errorf("gcm: %w", err)
	}
	return keyed{id: k.id(), aead: aead}, nil
}

// New returns a Box for opts.
func New(opts Opts) (*Box, error) {
	if opts.Key == (Key{}) {
		return nil, errors.New("secretbox: the key is all zeros, so it was never set")
	}
	cur, err := newKeyed(opts.Key)
	if err != nil {
		return nil, err
	}
	b := &Box{current: cur, origin: opts.Origin}
	if b.origin == "" {
		b.origin = "the secret key"
	}
	for _, p := range opts.Previous {
		if p.id() == cur.id {
			continue // the same key given twice opens with the current one
		}
		k, err := newKeyed(p)
		if err != nil {
			return nil, err
		}
		b.previous = append(b.previous, k)
	}
	return b, nil
}

// Origin says where the box's key comes from, as Opts.Origin gave it.
func (b *Box) Origin() string { return b.origin }

// KeyID is the current key's id in hex: safe to show, it names the key
// without revealing it.
func (b *Box) KeyID() string { return hex.EncodeToString(b.current.id[:]) }

// Seal seals plaintext, bound to ad, with the current key. Each call draws a
// new nonce, so sealing the same secret twice gives two different values.
func (b *Box) Seal(plaintext, ad []byte) ([]byte, error) {
	out := make([]byte, headerLen+nonceLen, Overhead+len(plaintext))
	out[0] = Version
	copy(out[1:headerLen], b.current.id[:])
	nonce := out[headerLen:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("secretbox: nonce: %w", err)
	}
	return b.current.aead.Seal(out, nonce, plaintext, additional(out[:headerLen], ad)), nil
}

// Open returns the plaintext of a value Seal made with the current key or a
// previous one, bound to the same ad. Its errors wrap ErrFormat, ErrUnknownKey
// or ErrAuth, and never quote the value.
func (b *Box) Open(sealed, ad []byte) ([]byte, error) {
	k, err := b.keyOf(sealed)
	if err != nil {
		return nil, err
	}
	header, rest := sealed[:headerLen], sealed[headerLen:]
	plain, err := k.aead.Open(nil, rest[:nonceLen], rest[nonceLen:], additional(header, ad))
	if err != nil {
		return nil, fmt.Errorf("secretbox: value of key %x %w", k.id, ErrAuth)
	}
	return plain, nil
}

// NeedsReseal reports whether sealed was made with a previous key, so that
// the caller re-seals it with the current one (Open, then Seal).
func (b *Box) NeedsReseal(sealed []byte) bool {
	k, err := b.keyOf(sealed)
	return err == nil && k.id != b.current.id
}

func (b *Box) keyOf(sealed []byte) (*keyed, error) {
	if len(sealed) < Overhead {
		return nil, fmt.Errorf("secretbox: %d bytes: %w", len(sealed), ErrFormat)
	}
	if sealed[0] != Version {
		return nil, fmt.Errorf("secretbox: version %d: %w", sealed[0], ErrFormat)
	}
	id := sealed[1:headerLen]
	if bytes.Equal(id, b.current.id[:]) {
		return &b.current, nil
	}
	for i := range b.previous {
		if bytes.Equal(id, b.previous[i].id[:]) {
			return &b.previous[i], nil
		}
	}
	return nil, fmt.Errorf("secretbox: key %x: %w", id, ErrUnknownKey)
}

// KeyIDOf returns the hex id of the key that sealed a value, or "" when it
// is not a sealed value.
func KeyIDOf(sealed []byte) string {
	if len(sealed) < Overhead || sealed[0] != Version {
		return ""
	}
	return hex.EncodeToString(sealed[1:headerLen])
}

// additional is the associated data GCM authenticates: the value's header,
// then the caller's.
func additional(header, ad []byte) []byte {
	out := make([]byte, 0, len(header)+len(ad))
	return append(append(out, header...), ad...)
}

// id is the key's id: a label keeps it apart from any other hash of the key.
func (k Key) id() [idLen]byte {
	h := sha256.New()
	h.Write([]byte("sluice secretbox key id\x00"))
	h.Write(k[:])
	var id [idLen]byte
	copy(id[:], h.Sum(nil))
	return id
}
