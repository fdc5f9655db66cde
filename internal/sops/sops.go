package sops

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
)

// Format is a SOPS file's format, as sops reads it from the file's name.
type Format string

// The formats sluice reads.
const (
	JSON   Format = "json"
	Dotenv Format = "dotenv"
	YAML   Format = "yaml"
)

// FormatFor returns the format sops gives a file of this name: .json,
// .env, .yaml or .yml (case matters, as it does to sops). Any other name
// would be a binary file to sops, which sluice does not read.
func FormatFor(name string) (Format, bool) {
	switch {
	case strings.HasSuffix(name, ".json"):
		return JSON, true
	case strings.HasSuffix(name, ".env"):
		return Dotenv, true
	case strings.HasSuffix(name, ".yaml"), strings.HasSuffix(name, ".yml"):
		return YAML, true
	}
	return "", false
}

// The reasons a file is refused. Every error Decrypt returns matches one of
// them with errors.Is, and reads as one sentence naming the file.
var (
	// ErrNotSOPS means the file has no sops metadata: it was never
	// encrypted, or its metadata was removed.
	ErrNotSOPS = errors.New("not a SOPS file")
	// ErrNoAgeRecipient means the file's data key is encrypted to no age
	// recipient (only to PGP or a cloud KMS, say).
	ErrNoAgeRecipient = errors.New("no age recipient")
	// ErrNoIdentity means none of the given identities is one of the file's
	// recipients.
	ErrNoIdentity = errors.New("no identity decrypts the data key")
	// ErrValue means a value does not decrypt with the file's data key: it
	// was edited, or its key renamed or moved.
	ErrValue = errors.New("a value does not decrypt")
	// ErrMAC means the values decrypt but their MAC does not match: one
	// was added, removed or reordered, or the MAC itself was changed.
	ErrMAC = errors.New("MAC mismatch")
	// ErrMalformed means the file or one of its values is not what sops
	// writes.
	ErrMalformed = errors.New("malformed SOPS file")
	// ErrUnsupported means the file is well-formed but uses something
	// sluice does not read: a format, key groups, comment regexes, or a
	// value that has no environment variable form.
	ErrUnsupported = errors.New("unsupported SOPS file")
)

// refusal is an error that reads as one sentence and matches a reason.
type refusal struct {
	reason error
	msg    string
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.reason }

func refuse(reason error, format string, args ...any) error {
	return &refusal{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// defaultUnencryptedSuffix is what sops leaves unencrypted when a file
// names no rule at all.
const defaultUnencryptedSuffix = "_unencrypted"

// macOnlyEncryptedPrefix starts the MAC of a file with mac_only_encrypted,
// so that its MAC differs from the one over every value (sops.go's
// MACOnlyEncryptedInitialization).
var macOnlyEncryptedPrefix = []byte{0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0xb, 0xb, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69}

// Decrypt decrypts the SOPS file name holds (data) with the first of
// identities that is one of its recipients, checks its MAC, and returns its
// top-level values. name picks the format (FormatFor) and names the file in
// errors; the file is read from data only.
func Decrypt(name string, data []byte, identities []Identity) (map[string]string, error) {
	format, ok := FormatFor(name)
	if !ok {
		return nil, refuse(ErrUnsupported, "%s is not a SOPS file sluice reads: name it .json, .env, .yaml or .yml after its format, as sops does", name)
	}
	doc, err := load(name, format, data)
	if err != nil {
		return nil, err
	}
	meta, err := parseMetadata(name, doc.meta)
	if err != nil {
		return nil, err
	}
	key, err := dataKey(name, meta, identities)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	mac, err := decryptTree(name, doc.branches, key, meta)
	if err != nil {
		return nil, err
	}
	if err := checkMAC(name, mac, key, meta); err != nil {
		return nil, err
	}
	return flatten(name, doc.branches)
}

// document is a loaded file: its branches (one per YAML document, else
// one) and its sops metadata, as a tree.
type document struct {
	branches []branch
	meta     any
}

func load(name string, format Format, data []byte) (*document, error) {
	switch format {
	case JSON:
		return loadJSON(name, data)
	case Dotenv:
		return loadDotenv(name, data)
	default:
		return loadYAML(name, data)
	}
}

// metadata is what Decrypt reads of a file's sops entry.
type metadata struct {
	age          []ageKey
	otherKeys    []string // the other kinds of key the file names: "pgp", "kms", …
	lastModified string   // as stored
	mac          string   // an ENC[…] value
	rules        rules
	macOnly      bool
}

type ageKey struct {
	recipient string
	enc       string // the armored age file holding the data key
}

// rules decide which values sops encrypted; at most one field is set.
type rules struct {
	unencryptedSuffix string
	encryptedSuffix   string
	unencryptedRegex  *regexp.Regexp
	encryptedRegex    *regexp.Regexp
}

// otherKeyKinds are the key kinds sops writes beside age, by their entry.
var otherKeyKinds = []string{"pgp", "kms", "gcp_kms", "azure_kv", "hc_vault", "hckms"}

func parseMetadata(name string, tree any) (*metadata, error) {
	m, ok := tree.(branch)
	if !ok {
		return nil, refuse(ErrMalformed, "%s has sops metadata that is not a mapping; encrypt the file again with sops", name)
	}
	str := func(key string) (string, error) {
		v, ok := m.get(key)
		if !ok || v == nil {
			return "", nil
		}
		switch v := v.(type) {
		case string:
			return v, nil
		case int, float64, bool:
			return fmt.Sprint(v), nil
		}
		return "", refuse(ErrMalformed, "%s has a sops.%s that is not a string; encrypt the file again with sops", name, key)
	}
	meta := &metadata{}
	var err error
	if meta.lastModified, err = str("lastmodified"); err != nil {
		return nil, err
	}
	if meta.mac, err = str("mac"); err != nil {
		return nil, err
	}
	macOnly, err := str("mac_only_encrypted")
	if err != nil {
		return nil, err
	}
	if macOnly != "" {
		if meta.macOnly, err = strconv.ParseBool(macOnly); err != nil {
			return nil, refuse(ErrMalformed, "%s has a sops.mac_only_encrypted that is not true or false; encrypt the file again with sops", name)
		}
	}

	if groups, ok := m.get("key_groups"); ok && !isEmptyList(groups) {
		return nil, refuse(ErrUnsupported, "%s uses key groups (Shamir's secret sharing), which sluice does not read; encrypt it to age recipients without key groups", name)
	}
	for _, kind := range []string{"encrypted_comment_regex", "unencrypted_comment_regex"} {
		if v, err := str(kind); err != nil {
			return nil, err
		} else if v != "" {
			return nil, refuse(ErrUnsupported, "%s uses sops.%s, which sluice does not read; encrypt it with a key suffix or regex instead", name, kind)
		}
	}

	var set []string
	for _, rule := range []struct {
		key string
		to  func(string) error
	}{
		{"unencrypted_suffix", func(v string) error { meta.rules.unencryptedSuffix = v; return nil }},
		{"encrypted_suffix", func(v string) error { meta.rules.encryptedSuffix = v; return nil }},
		{"unencrypted_regex", func(v string) (err error) { meta.rules.unencryptedRegex, err = regexp.Compile(v); return err }},
		{"encrypted_regex", func(v string) (err error) { meta.rules.encryptedRegex, err = regexp.Compile(v); return err }},
	} {
		v, err := str(rule.key)
		if err != nil {
			return nil, err
		}
		if v == "" {
			continue
		}
		if err := rule.to(v); err != nil {
			return nil, refuse(ErrMalformed, "%s has a sops.%s that is not a valid regular expression; encrypt the file again with sops", name, rule.key)
		}
		set = append(set, rule.key)
	}
	switch len(set) {
	case 0:
		meta.rules.unencryptedSuffix = defaultUnencryptedSuffix
	case 1:
	default:
		return nil, refuse(ErrMalformed, "%s names more than one of sops.%s, which sops itself refuses; encrypt the file again with sops", name, strings.Join(set, ", sops."))
	}

	if ages, ok := m.get("age"); ok && ages != nil {
		list, ok := ages.([]any)
		if !ok {
			return nil, refuse(ErrMalformed, "%s has a sops.age that is not a list; encrypt the file again with sops", name)
		}
		for _, entry := range list {
			e, ok := entry.(branch)
			if !ok {
				return nil, refuse(ErrMalformed, "%s has a sops.age entry that is not a mapping; encrypt the file again with sops", name)
			}
			recipient, _ := e.getString("recipient")
			enc, _ := e.getString("enc")
			if enc == "" {
				return nil, refuse(ErrMalformed, "%s has a sops.age entry with no encrypted data key; encrypt the file again with sops", name)
			}
			meta.age = append(meta.age, ageKey{recipient: recipient, enc: enc})
		}
	}
	for _, kind := range otherKeyKinds {
		if v, ok := m.get(kind); ok && !isEmptyList(v) {
			meta.otherKeys = append(meta.otherKeys, kind)
		}
	}
	return meta, nil
}

// isEmptyList reports whether v is nothing, or an empty list.
func isEmptyList(v any) bool {
	if v == nil {
		return true
	}
	l, ok := v.([]any)
	return ok && len(l) == 0
}

// dataKey opens the data key with the first identity that is one of the
// file's age recipients.
func dataKey(name string, meta *metadata, identities []Identity) ([]byte, error) {
	if len(meta.age) == 0 {
		if len(meta.otherKeys) > 0 {
			return nil, refuse(ErrNoAgeRecipient, "%s has no age recipient (its data key is encrypted to %s only); add sluice's age recipient with sops updatekeys or sops encrypt --age", name, strings.Join(meta.otherKeys, ", "))
		}
		return nil, refuse(ErrNoAgeRecipient, "%s has no age recipient; add sluice's age recipient with sops updatekeys or sops encrypt --age", name)
	}
	var ids []age.Identity
	var mine []string
	for _, id := range identities {
		if id.id != nil {
			ids = append(ids, id.id)
			mine = append(mine, id.recipient)
		}
	}
	var theirs []string
	for _, k := range meta.age {
		theirs = append(theirs, k.recipient)
	}
	if len(ids) == 0 {
		return nil, refuse(ErrNoIdentity, "%s cannot be decrypted: sluice holds no age identity (the file's recipients: %s)", name, strings.Join(theirs, ", "))
	}
	malformed := false
	for _, k := range meta.age {
		r, err := age.Decrypt(armor.NewReader(strings.NewReader(k.enc)), ids...)
		if err != nil {
			var noMatch *age.NoIdentityMatchError
			if !errors.As(err, &noMatch) {
				malformed = true
			}
			continue
		}
		key, err := io.ReadAll(io.LimitReader(r, 64))
		if err != nil {
			malformed = true
			continue
		}
		if len(key) != 32 {
			return nil, refuse(ErrMalformed, "%s has a data key of %d bytes, not the 32 of AES-256; encrypt the file again with sops", name, len(key))
		}
		return key, nil
	}
	if malformed {
		return nil, refuse(ErrMalformed, "%s has an age-encrypted data key that is not a valid age file; encrypt the file again with sops", name)
	}
	return nil, refuse(ErrNoIdentity, "%s does not decrypt with sluice's age identity (the file's recipients: %s; sluice's: %s); add sluice's recipient with sops updatekeys or sops encrypt --age", name, strings.Join(theirs, ", "), strings.Join(mine, ", "))
}

// checkMAC compares the MAC of the values with the one the file stores,
// which is encrypted under the data key with lastmodified as associated
// data: a MAC from another file, or a changed lastmodified, does not
// decrypt.
func checkMAC(name, mac string, key []byte, meta *metadata) error {
	mismatch := refuse(ErrMAC, "%s does not match its MAC: the file was changed after it was encrypted; edit it only with sops, which updates the MAC", name)
	modified, err := time.Parse(time.RFC3339, meta.lastModified)
	if err != nil {
		return refuse(ErrMalformed, "%s has a sops.lastmodified that is not an RFC 3339 time; encrypt the file again with sops", name)
	}
	if meta.mac == "" {
		return mismatch
	}
	stored, err := decryptValue(meta.mac, key, modified.Format(time.RFC3339))
	if errors.Is(err, errFormat) {
		return refuse(ErrMalformed, "%s has a sops.mac that is not an ENC[AES256_GCM,…] value; encrypt the file again with sops", name)
	}
	if err != nil {
		return mismatch
	}
	s, ok := stored.(string)
	if !ok || subtle.ConstantTimeCompare([]byte(s), []byte(mac)) != 1 {
		return mismatch
	}
	return nil
}

// flatten turns the decrypted values into environment variables, as sops
// exec-env does: only the top level of one document, strings as they are,
// numbers and booleans as sops prints them.
func flatten(name string, branches []branch) (map[string]string, error) {
	if len(branches) != 1 {
		return nil, refuse(ErrUnsupported, "%s holds %d YAML documents; sluice reads a file of one", name, len(branches))
	}
	out := make(map[string]string, len(branches[0]))
	for _, it := range branches[0] {
		switch {
		case it.key == "":
			return nil, refuse(ErrUnsupported, "%s has an empty key, which is no environment variable name", name)
		case strings.ContainsAny(it.key, "=\x00"):
			return nil, refuse(ErrUnsupported, "%s has the key %q, which holds = or NUL and so is no environment variable name", name, it.key)
		}
		if _, dup := out[it.key]; dup {
			return nil, refuse(ErrUnsupported, "%s names %q twice; give each variable once", name, it.key)
		}
		var s string
		switch v := it.value.(type) {
		case branch, []any:
			return nil, refuse(ErrUnsupported, "%s holds a nested value at %q; sluice reads only top-level strings, numbers and booleans, which become environment variables", name, it.key)
		case nil:
			return nil, refuse(ErrUnsupported, "%s holds null at %q; give it a string, number or boolean, or remove it", name, it.key)
		case comment:
			return nil, refuse(ErrMalformed, "%s has a comment at %q where a value belongs; encrypt the file again with sops", name, it.key)
		default:
			s = envString(v)
		}
		out[it.key] = s
	}
	return out, nil
}

// errFormat marks a value that is not an ENC[AES256_GCM,…] string.
var errFormat = errors.New("not an ENC[AES256_GCM,…] value")
