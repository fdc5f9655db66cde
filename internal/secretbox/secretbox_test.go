package secretbox

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBox(t *testing.T) {
	t.Parallel()

	const secret = "pw-Sup3rSecret-value"
	ad := []byte("source 7f0e")

	type testBundle struct {
		key, other Key
		box        *Box
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		key, err := NewKey()
		require.NoError(t, err)
		other, err := NewKey()
		require.NoError(t, err)
		box, err := New(Opts{Key: key, Origin: "the test key"})
		require.NoError(t, err)
		return &testBundle{key: key, other: other, box: box}
	}

	t.Run("SealedValueOpensAndHidesTheSecret", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sealed, err := b.box.Seal([]byte(secret), ad)
		require.NoError(t, err)
		require.Len(t, sealed, Overhead+len(secret))
		require.Equal(t, Version, sealed[0])
		require.Equal(t, b.box.KeyID(), KeyIDOf(sealed))
		for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), hex.EncodeToString([]byte(secret))} {
			require.NotContains(t, string(sealed), form)
		}
		plain, err := b.box.Open(sealed, ad)
		require.NoError(t, err)
		require.Equal(t, secret, string(plain))
		require.False(t, b.box.NeedsReseal(sealed))

		again, err := b.box.Seal([]byte(secret), ad)
		require.NoError(t, err)
		require.NotEqual(t, sealed, again, "every seal draws a new nonce")
	})

	t.Run("ValueMovedToAnotherPlaceDoesNotOpen", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sealed, err := b.box.Seal([]byte(secret), ad)
		require.NoError(t, err)
		_, err = b.box.Open(sealed, []byte("source 9a12"))
		require.ErrorIs(t, err, ErrAuth)
		require.NotContains(t, err.Error(), secret)
	})

	t.Run("ChangedValueDoesNotOpen", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sealed, err := b.box.Seal([]byte(secret), ad)
		require.NoError(t, err)
		for _, i := range []int{headerLen, headerLen + nonceLen, len(sealed) - 1} {
			changed := append([]byte(nil), sealed...)
			changed[i] ^= 1
			_, err = b.box.Open(changed, ad)
			require.ErrorIs(t, err, ErrAuth, "byte %d", i)
		}
		_, err = b.box.Open(sealed[:Overhead-1], ad)
		require.ErrorIs(t, err, ErrFormat)
		plainTagged := append([]byte{0}, []byte(secret+strings.Repeat("x", Overhead))...)
		_, err = b.box.Open(plainTagged, ad)
		require.ErrorIs(t, err, ErrFormat)
		require.NotContains(t, err.Error(), secret)
	})

	t.Run("AnotherKeyIsNamedUnknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		otherBox, err := New(Opts{Key: b.other})
		require.NoError(t, err)
		sealed, err := otherBox.Seal([]byte(secret), ad)
		require.NoError(t, err)
		_, err = b.box.Open(sealed, ad)
		require.ErrorIs(t, err, ErrUnknownKey)
		require.Contains(t, err.Error(), otherBox.KeyID())
		require.False(t, b.box.NeedsReseal(sealed), "a value no key opens cannot be re-sealed")
	})

	t.Run("PreviousKeyOpensAndAsksForAReseal", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sealed, err := b.box.Seal([]byte(secret), ad)
		require.NoError(t, err)

		rotated, err := New(Opts{Key: b.other, Previous: []Key{b.key, b.other}})
		require.NoError(t, err)
		require.True(t, rotated.NeedsReseal(sealed))
		plain, err := rotated.Open(sealed, ad)
		require.NoError(t, err)
		resealed, err := rotated.Seal(plain, ad)
		require.NoError(t, err)
		require.False(t, rotated.NeedsReseal(resealed))
		require.Equal(t, rotated.KeyID(), KeyIDOf(resealed))

		_, err = b.box.Open(resealed, ad)
		require.ErrorIs(t, err, ErrUnknownKey, "the old key no longer opens what was re-sealed")
	})

	t.Run("ZeroKeyIsRefused", func(t *testing.T) {
		t.Parallel()
		_, err := New(Opts{})
		require.ErrorContains(t, err, "never set")
	})

	t.Run("KeyNeverPrints", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out := fmt.Sprintf("%v %+v %#v %s", b.key, b.key, b.key, b.key)
		out += fmt.Sprintf("%v %+v", b.box, b.box)
		for _, form := range []string{hex.EncodeToString(b.key[:]), base64.StdEncoding.EncodeToString(b.key[:])} {
			require.NotContains(t, out, form)
		}
	})
}

func TestParseKey(t *testing.T) {
	t.Parallel()

	var want Key
	for i := range want {
		want[i] = byte(i)
	}
	b64 := base64.StdEncoding.EncodeToString(want[:])
	hx := hex.EncodeToString(want[:])

	for _, in := range []string{b64, hx, strings.ToUpper(hx), " " + b64 + "\n"} {
		k, err := ParseKey(in)
		require.NoError(t, err, "input %q", in)
		require.Equal(t, want, k)
	}
	for _, tt := range []struct{ in, wantErr string }{
		{"", "decodes to 0 bytes"},
		{base64.StdEncoding.EncodeToString(want[:16]), "decodes to 16 bytes"},
		{hx[:62] + "zz", "it is neither"},
		{"not-a-key-at-all!", "it is neither"},
	} {
		_, err := ParseKey(tt.in)
		require.ErrorContains(t, err, tt.wantErr, "input %q", tt.in)
		require.ErrorContains(t, err, "openssl rand -base64 32")
		if tt.in != "" {
			require.NotContains(t, err.Error(), tt.in)
		}
	}
}

func TestLoadKeyFile(t *testing.T) {
	t.Parallel()

	t.Run("CreatesOnceOwnerOnlyAndReadsItBack", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "data", "secret.key")
		k, created, err := LoadKeyFile(path)
		require.NoError(t, err)
		require.True(t, created)
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		require.Equal(t, int64(KeyLen), fi.Size())
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, k[:], raw)

		again, created, err := LoadKeyFile(path)
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, k, again)
		entries, err := os.ReadDir(filepath.Dir(path))
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file is left")
	})

	t.Run("ConcurrentFirstStartsAgreeOnOneKey", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "secret.key")
		const n = 16
		keys := make([]Key, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				var err error
				keys[i], _, err = LoadKeyFile(path)
				require.NoError(t, err)
			})
		}
		wg.Wait()
		for _, k := range keys {
			require.Equal(t, keys[0], k)
		}
	})

	t.Run("TextKeyIsRead", func(t *testing.T) {
		t.Parallel()
		want, err := NewKey()
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "secret.key")
		require.NoError(t, os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(want[:])+"\n"), 0o600))
		k, created, err := LoadKeyFile(path)
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, want, k)
	})

	t.Run("LooseModeAndWrongSizeAreRefusedSayingWhatToDo", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		loose := filepath.Join(dir, "loose.key")
		require.NoError(t, os.WriteFile(loose, make([]byte, KeyLen), 0o644))
		_, _, err := LoadKeyFile(loose)
		require.ErrorContains(t, err, "chmod 600 "+loose)

		short := filepath.Join(dir, "short.key")
		require.NoError(t, os.WriteFile(short, []byte("0123456789"), 0o600))
		_, _, err = LoadKeyFile(short)
		require.ErrorContains(t, err, "holds 10 bytes, not a key")
		require.ErrorContains(t, err, "restore it from a backup")
		require.NotContains(t, err.Error(), "0123456789")
		raw, err := os.ReadFile(short)
		require.NoError(t, err)
		require.Equal(t, "0123456789", string(raw), "a bad key file is never replaced")
	})
}
