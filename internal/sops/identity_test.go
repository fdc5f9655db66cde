package sops

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fixture reads a file of testdata.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

// testIdentity reads the key line of one of testdata/keys.
func testIdentity(t *testing.T, name string) Identity {
	t.Helper()
	for line := range strings.Lines(string(fixture(t, "keys/"+name+".agekey"))) {
		if strings.HasPrefix(line, "AGE-SECRET-KEY-") {
			id, err := ParseIdentity(line)
			require.NoError(t, err)
			return id
		}
	}
	t.Fatalf("no identity in testdata/keys/%s.agekey", name)
	return Identity{}
}

func TestIdentity(t *testing.T) {
	t.Parallel()

	t.Run("NewIdentityParsesBackToItsRecipient", func(t *testing.T) {
		t.Parallel()
		id, err := NewIdentity()
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(id.Recipient(), "age1"), id.Recipient())
		require.True(t, strings.HasPrefix(id.Secret(), "AGE-SECRET-KEY-1"))

		again, err := ParseIdentity(" " + id.Secret() + "\n")
		require.NoError(t, err)
		require.Equal(t, id.Recipient(), again.Recipient())
		require.Equal(t, id.Secret(), again.Secret())

		other, err := NewIdentity()
		require.NoError(t, err)
		require.NotEqual(t, id.Recipient(), other.Recipient())
	})

	t.Run("TestKeysParseToTheRecipientsAgeKeygenPrinted", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"test", "second", "stranger", "hybrid"} {
			id := testIdentity(t, name)
			printed := regexp.MustCompile(`# public key: (\S+)`).FindStringSubmatch(string(fixture(t, "keys/"+name+".agekey")))
			require.Equal(t, printed[1], id.Recipient(), name)
		}
	})

	t.Run("PrintedIdentityShowsOnlyItsRecipient", func(t *testing.T) {
		t.Parallel()
		id, err := NewIdentity()
		require.NoError(t, err)
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			s := fmt.Sprintf(verb, id)
			require.Contains(t, s, id.Recipient(), verb)
			require.NotContains(t, s, id.Secret(), verb)
			require.NotContains(t, s, "AGE-SECRET-KEY", verb)
		}
	})

	t.Run("MalformedIdentityIsRefusedWithoutQuotingIt", func(t *testing.T) {
		t.Parallel()
		id, err := NewIdentity()
		require.NoError(t, err)
		last := "Q"
		if strings.HasSuffix(id.Secret(), last) {
			last = "P"
		}
		broken := id.Secret()[:len(id.Secret())-1] + last // the checksum fails
		for _, s := range []string{broken, "not-a-key", id.Recipient()} {
			_, err := ParseIdentity(s)
			require.Error(t, err, s)
			require.NotContains(t, err.Error(), s)
		}
	})
}
