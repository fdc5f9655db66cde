package secretbox

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeyLen is the length of a key in bytes: AES-256.
const KeyLen = 32

// Key is a secret key. Its String and GoString never show it.
type Key [KeyLen]byte

// String implements fmt.Stringer without revealing the key.
func (Key) String() string { return "secretbox.Key(***)" }

// GoString implements fmt.GoStringer without revealing the key.
func (Key) GoString() string { return "secretbox.Key(***)" }

// NewKey returns a key of random bytes.
func NewKey() (Key, error) {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return Key{}, fmt.Errorf("secretbox: new key: %w", err)
	}
	return k, nil
}

// ParseKey reads a key written as 64 hex digits or as standard base64 (44
// characters with padding, as `openssl rand -base64 32` prints it);
// surrounding white space is ignored. Its errors never quote s.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	var raw []byte
	var err error
	if len(s) == 2*KeyLen {
		raw, err = hex.DecodeString(s)
	} else {
		raw, err = base64.StdEncoding.DecodeString(s)
	}
	const want = "it must be 32 bytes written as standard base64 (44 characters, as `openssl rand -base64 32` prints them) or as 64 hex digits"
	if err != nil {
		return Key{}, errors.New(want + "; it is neither")
	}
	if len(raw) != KeyLen {
		return Key{}, fmt.Errorf("%s; it decodes to %d bytes", want, len(raw))
	}
	var k Key
	copy(k[:], raw)
	return k, nil
}

// LoadKeyFile reads the key in the file at path, creating the file first
// with a new random key when it does not exist (created is then true). The
// file holds the 32 bytes themselves; one written as base64 or hex text (a
// key from ParseKey's formats) is read too. A file that others than its
// owner may read is refused, as ssh refuses such a private key. Concurrent
// callers, in one process or several, all end up with the same key: the
// file appears whole or not at all.
func LoadKeyFile(path string) (k Key, created bool, err error) {
	k, err = readKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Key{}, false, fmt.Errorf("create the directory of the key file: %w", err)
	}
	fresh, err := NewKey()
	if err != nil {
		return Key{}, false, err
	}
	tmp, err := os.CreateTemp(dir, ".secret-key-*")
	if err != nil {
		return Key{}, false, fmt.Errorf("create the key file in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600; the key is written once it is so.
	if _, err := tmp.Write(fresh[:]); err != nil {
		tmp.Close()
		return Key{}, false, fmt.Errorf("write the key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return Key{}, false, fmt.Errorf("write the key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Key{}, false, fmt.Errorf("write the key file: %w", err)
	}
	// A link, unlike a rename, never replaces a key file another process
	// created meanwhile: the first one wins, and the others read it.
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		k, err = readKeyFile(path)
		return k, false, err
	} else if err != nil {
		return Key{}, false, fmt.Errorf("create the key file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return fresh, true, nil
}

func readKeyFile(path string) (Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return Key{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Key{}, err
	}
	if !fi.Mode().IsRegular() {
		return Key{}, fmt.Errorf("the key file %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return Key{}, fmt.Errorf("the key file %s may be read by others (mode %04o); make it readable by its owner only: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	// A key file is tiny: a larger one is not ours, and is not read whole.
	buf := make([]byte, 256)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return Key{}, fmt.Errorf("read the key file %s: %w", path, err)
	}
	buf = buf[:n]
	if n == KeyLen {
		var k Key
		copy(k[:], buf)
		return k, nil
	}
	k, perr := ParseKey(string(buf))
	if perr != nil {
		return Key{}, fmt.Errorf("the key file %s holds %d bytes, not a key: it must hold the %d bytes of the key (or the key as base64 or hex text); restore it from a backup", path, fi.Size(), KeyLen)
	}
	return k, nil
}
