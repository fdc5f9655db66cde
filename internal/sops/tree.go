package sops

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// branch is a mapping in document order, as sops keeps it: the MAC covers
// values in this order, so no Go map can stand for it.
type branch []item

type item struct {
	key   string
	value any // string, int, float64, bool, nil, branch or []any; after decryption also []byte or time.Time
}

func (b branch) get(key string) (any, bool) {
	for _, it := range b {
		if it.key == key {
			return it.value, true
		}
	}
	return nil, false
}

func (b branch) getString(key string) (string, bool) {
	v, _ := b.get(key)
	s, ok := v.(string)
	return s, ok
}

// encrypted reports whether sops encrypted the value at path, by the
// file's one rule (sops.go's shouldBeEncrypted without the comment
// regexes, which parseMetadata refuses). Every key on the path counts, not
// only the last.
func (r rules) encrypted(path []string) bool {
	switch {
	case r.unencryptedSuffix != "":
		for _, k := range path {
			if strings.HasSuffix(k, r.unencryptedSuffix) {
				return false
			}
		}
		return true
	case r.encryptedSuffix != "":
		for _, k := range path {
			if strings.HasSuffix(k, r.encryptedSuffix) {
				return true
			}
		}
		return false
	case r.unencryptedRegex != nil:
		for _, k := range path {
			if r.unencryptedRegex.MatchString(k) {
				return false
			}
		}
		return true
	case r.encryptedRegex != nil:
		for _, k := range path {
			if r.encryptedRegex.MatchString(k) {
				return true
			}
		}
		return false
	}
	return true
}

// decryptTree decrypts every value sops encrypted, in place, and returns
// the MAC of the values (sops.go's Tree.Decrypt): SHA-512 over each
// value's bytes in document order, as upper-case hex. A value's associated
// data is its path: the keys from the top, each followed by ":". Items of
// a list share their list's path.
func decryptTree(name string, branches []branch, key []byte, meta *metadata) (string, error) {
	hash := sha512.New()
	if meta.macOnly {
		hash.Write(macOnlyEncryptedPrefix)
	}
	var walk func(v any, path []string) (any, error)
	walk = func(v any, path []string) (any, error) {
		switch v := v.(type) {
		case nil:
			// sops neither decrypts nor hashes a null.
			return nil, nil
		case branch:
			for i := range v {
				var err error
				if v[i].value, err = walk(v[i].value, append(path[:len(path):len(path)], v[i].key)); err != nil {
					return nil, err
				}
			}
			return v, nil
		case []any:
			for i := range v {
				var err error
				if v[i], err = walk(v[i], path); err != nil {
					return nil, err
				}
			}
			return v, nil
		}
		encrypted := meta.rules.encrypted(path)
		plain := v
		if encrypted {
			s, ok := v.(string)
			if !ok {
				return nil, refuse(ErrValue, "%s has a value at %s that is not encrypted, where sops would have encrypted it: the file was changed after it was encrypted", name, showPath(path))
			}
			var err error
			plain, err = decryptValue(s, key, strings.Join(path, ":")+":")
			switch {
			case errors.Is(err, errFormat):
				return nil, refuse(ErrValue, "%s has a value at %s that is not an ENC[AES256_GCM,data:…,iv:…,tag:…,type:…] value: the file was changed after it was encrypted", name, showPath(path))
			case errors.Is(err, errType):
				return nil, refuse(ErrMalformed, "%s has a value at %s whose type does not hold what it decrypts to; encrypt the file again with sops", name, showPath(path))
			case err != nil:
				return nil, refuse(ErrValue, "%s has a value at %s that does not decrypt with the file's data key: the value was changed, or its key renamed or moved, after the file was encrypted", name, showPath(path))
			}
		}
		if _, ok := plain.(comment); ok {
			// sops writes a comment inside a list as an item of type
			// comment, and leaves it out of the MAC.
			return plain, nil
		}
		if !meta.macOnly || encrypted {
			b, err := macBytes(plain)
			if err != nil {
				return nil, refuse(ErrMalformed, "%s has a value at %s of a type sops does not write; encrypt the file again with sops", name, showPath(path))
			}
			hash.Write(b)
		}
		return plain, nil
	}
	for _, b := range branches {
		if _, err := walk(b, nil); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%X", hash.Sum(nil)), nil
}

// showPath names a value for an error: its keys, dotted and quoted.
func showPath(path []string) string {
	return strconv.Quote(strings.Join(path, "."))
}

// encValue is sops's encrypted value (aes/cipher.go). The pattern is
// sops's own, unanchored at the end as sops has it.
var encValue = regexp.MustCompile(`^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]`)

// errType marks a value whose plaintext does not parse as its type.
var errType = errors.New("plaintext does not parse as its type")

// comment is a value of type comment: sops encrypts comments, and leaves
// them out of the MAC.
type comment string

// decryptValue decrypts one ENC[…] value, with aad as associated data, to
// the type it names (aes/cipher.go's Decrypt). An empty string is an empty
// value, as sops writes it. Its errors never hold the value.
func decryptValue(s string, key []byte, aad string) (any, error) {
	if s == "" {
		return "", nil
	}
	m := encValue.FindStringSubmatch(s)
	if m == nil {
		return nil, errFormat
	}
	var parts [3][]byte
	for i := range parts {
		var err error
		if parts[i], err = base64.StdEncoding.DecodeString(m[i+1]); err != nil {
			return nil, errFormat
		}
	}
	data, iv, tag := parts[0], parts[1], parts[2]
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if len(iv) == 0 {
		return nil, errFormat
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		return nil, errFormat
	}
	plain, err := gcm.Open(nil, iv, append(data[:len(data):len(data)], tag...), []byte(aad))
	if err != nil {
		return nil, errors.New("does not authenticate")
	}
	text := string(plain)
	var v any
	switch m[4] {
	case "str":
		v = text
	case "int":
		v, err = strconv.Atoi(text)
	case "float":
		v, err = strconv.ParseFloat(text, 64)
	case "bytes":
		v = plain
	case "bool":
		v, err = strconv.ParseBool(text)
	case "time":
		var t time.Time
		err = t.UnmarshalText(plain)
		v = t
	case "comment":
		v = comment(text)
	default:
		return nil, errFormat
	}
	if err != nil {
		return nil, errType
	}
	return v, nil
}

// macBytes is a value's part of the MAC (sops.go's ToBytes).
func macBytes(v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return []byte(v), nil
	case int:
		return []byte(strconv.Itoa(v)), nil
	case float64:
		return []byte(strconv.FormatFloat(v, 'f', -1, 64)), nil
	case bool:
		if v {
			return []byte("True"), nil
		}
		return []byte("False"), nil
	case []byte:
		return v, nil
	case time.Time:
		return v.MarshalText()
	}
	return nil, fmt.Errorf("a value of type %T", v)
}

// envString is a value as sops exec-env puts it in the environment
// (stores.ValToString): a float keeps a decimal point, so that 1.0 stays
// "1.0"; a boolean is "true" or "false".
func envString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case float64:
		s := strconv.FormatFloat(v, 'G', -1, 64)
		if !strings.ContainsAny(s, ".E") {
			s = strconv.FormatFloat(v, 'f', 1, 64)
		}
		return s
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.Format(time.RFC3339)
	}
	return fmt.Sprint(v)
}
