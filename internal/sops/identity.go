package sops

import (
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"
)

// Identity is an age identity SOPS files are decrypted with. Its String
// and GoString show only its recipient, so that a log line or a %v never
// prints the secret; Secret gives the secret to seal. The zero Identity
// decrypts nothing.
type Identity struct {
	id        age.Identity
	recipient string
	secret    string
}

// NewIdentity generates an X25519 identity, the kind `age-keygen` makes.
func NewIdentity() (Identity, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return Identity{}, fmt.Errorf("generate age identity: %w", err)
	}
	return Identity{id: id, recipient: id.Recipient().String(), secret: id.String()}, nil
}

// ParseIdentity parses an age identity: AGE-SECRET-KEY-1… (X25519) or
// AGE-SECRET-KEY-PQ-1… (the hybrid post-quantum kind). Surrounding space
// is ignored; an identity file's comment lines are not (give the key line
// alone). Its error never quotes s.
func ParseIdentity(s string) (Identity, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "AGE-SECRET-KEY-PQ-1"):
		id, err := age.ParseHybridIdentity(s)
		if err != nil {
			return Identity{}, errors.New("the age identity does not parse: an AGE-SECRET-KEY-PQ-1… key is malformed")
		}
		return Identity{id: id, recipient: id.Recipient().String(), secret: id.String()}, nil
	case strings.HasPrefix(s, "AGE-SECRET-KEY-1"):
		id, err := age.ParseX25519Identity(s)
		if err != nil {
			return Identity{}, errors.New("the age identity does not parse: an AGE-SECRET-KEY-1… key is malformed")
		}
		return Identity{id: id, recipient: id.Recipient().String(), secret: id.String()}, nil
	}
	return Identity{}, errors.New("the age identity does not parse: it must start with AGE-SECRET-KEY-1 (as age-keygen writes it) or AGE-SECRET-KEY-PQ-1")
}

// Recipient returns the identity's public recipient (age1…), which is safe
// to show: a SOPS file encrypted to it decrypts with this identity.
func (i Identity) Recipient() string { return i.recipient }

// Secret returns the identity in age's text form (AGE-SECRET-KEY-1…), for
// sealing at rest. It is the secret: never log or answer it.
func (i Identity) Secret() string { return i.secret }

// String shows the recipient only.
func (i Identity) String() string { return "sops.Identity(" + i.recipient + ")" }

// GoString shows the recipient only.
func (i Identity) GoString() string { return i.String() }
