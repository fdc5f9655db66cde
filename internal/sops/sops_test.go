package sops

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fixtures in testdata were encrypted by sops itself (make-fixtures.sh),
// to age recipients whose identities are in testdata/keys: test keys, public
// in the repository. exec-env/ holds the environment sops exec-env gave a
// process for each of them.

// plaintexts are values of the fixtures, which no error may quote.
var plaintexts = []string{
	"p@ss\"w0rd", "line one", "indented three", "ticked", "$(echo no)", "grüße", "東京", "🔑",
	"leading and trailing", "a=b==c", "regex-secret", "regex-token", "unencrypted-regex-secret",
	"suffix-secret", "two-recipients-secret", "two-recipients-token", "nested-secret", "shamir-secret",
	"equals-secret", "hybrid-secret",
}

// execEnv reads what sops exec-env gave a process for a fixture.
func execEnv(t *testing.T, name string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, kv := range bytes.Split(bytes.TrimSuffix(fixture(t, "exec-env/"+name+".nul"), []byte{0}), []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		require.True(t, ok)
		env[k] = v
	}
	return env
}

// requireRefused checks err's reason and that it quotes no value.
func requireRefused(t *testing.T, err error, reason error, sentence string) {
	t.Helper()
	require.ErrorIs(t, err, reason)
	require.Contains(t, err.Error(), sentence)
	for _, p := range plaintexts {
		require.NotContains(t, err.Error(), p)
	}
}

// replaceOnce replaces old, which must occur in s exactly once.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	require.Equal(t, 1, strings.Count(s, old), "%q in the fixture", old)
	return strings.Replace(s, old, new, 1)
}

// encField matches one field of the ENC[…] value that follows a key.
func encField(prefix, field string) *regexp.Regexp {
	return regexp.MustCompile(regexp.QuoteMeta(prefix) + `ENC\[AES256_GCM,.*?` + field + `:([^,\]]+)`)
}

// flipByte changes one byte of a base64 field of the ENC[…] value that
// follows prefix (`"KEY": "` in JSON, `KEY=` in dotenv), so that the value
// is still well-formed and only its bytes differ.
func flipByte(t *testing.T, s, prefix, field string) string {
	t.Helper()
	re := encField(prefix, field)
	m := re.FindStringSubmatchIndex(s)
	require.NotNil(t, m, "%s of %q in the fixture", field, prefix)
	raw, err := base64.StdEncoding.DecodeString(s[m[2]:m[3]])
	require.NoError(t, err)
	raw[len(raw)/2] ^= 0x01
	return s[:m[2]] + base64.StdEncoding.EncodeToString(raw) + s[m[3]:]
}

// line returns the one line of s that starts (after indentation) with
// prefix, newline included.
func line(t *testing.T, s, prefix string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^[ \t]*`+regexp.QuoteMeta(prefix)+`.*\n`).FindAllString(s, -1)
	require.Len(t, m, 1, "lines starting %q", prefix)
	return m[0]
}

// swapLines exchanges the lines starting with a and b. A JSON line's
// trailing comma stays where it was, so that the object stays valid.
func swapLines(t *testing.T, s, a, b string) string {
	t.Helper()
	la, lb := line(t, s, a), line(t, s, b)
	moved := func(from, to string) string {
		from = strings.TrimSuffix(strings.TrimSuffix(from, "\n"), ",")
		if strings.HasSuffix(to, ",\n") {
			return from + ",\n"
		}
		return from + "\n"
	}
	s = replaceOnce(t, s, la, "\x00A\x00")
	s = replaceOnce(t, s, lb, moved(la, lb))
	return replaceOnce(t, s, "\x00A\x00", moved(lb, la))
}

func TestDecrypt(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		id, second, stranger Identity
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{
			id:       testIdentity(t, "test"),
			second:   testIdentity(t, "second"),
			stranger: testIdentity(t, "stranger"),
		}
	}
	decrypt := func(t *testing.T, b *testBundle, name, data string) (map[string]string, error) {
		t.Helper()
		return Decrypt(name, []byte(data), []Identity{b.id})
	}

	t.Run("JSONGivesWhatSopsExecEnvGives", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := decrypt(t, b, "app.json", string(fixture(t, "app.json")))
		require.NoError(t, err)
		require.Equal(t, execEnv(t, "app.json"), got)
		require.Equal(t, map[string]string{
			"DATABASE_URL":       `postgres://app:p@ss"w0rd$HOME@db:5432/app?sslmode=require`,
			"MULTILINE":          "line one\nline two\n  indented three\n",
			"QUOTES":             "it's \"double\", 'single' and `ticked`",
			"DOLLAR":             `$HOME ${PATH} $(echo no) 100% \n`,
			"UNICODE":            "grüße, 東京, 🔑, tab\tend",
			"EMPTY":              "",
			"PORT":               "5432",
			"RATIO":              "0.75",
			"WHOLE_FLOAT":        "1.0",
			"BIG":                "1.2345678901234567E+19",
			"DEBUG":              "true",
			"VERBOSE":            "false",
			"REGION_unencrypted": "eu-west-1",
		}, got)
	})

	t.Run("DotenvGivesWhatSopsExecEnvGives", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := decrypt(t, b, "app.env", string(fixture(t, "app.env")))
		require.NoError(t, err)
		require.Equal(t, execEnv(t, "app.env"), got)
		require.Equal(t, "line one\nline two", got["MULTILINE"])
		require.Equal(t, "a=b==c", got["EQUALS"])
		require.Equal(t, "  leading and trailing  ", got["SPACES"])
		require.Equal(t, `$HOME ${PATH} $(echo no) 100%`, got["DOLLAR"])
	})

	t.Run("YAMLGivesWhatSopsExecEnvGives", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := decrypt(t, b, "app.yaml", string(fixture(t, "app.yaml")))
		require.NoError(t, err)
		require.Equal(t, execEnv(t, "app.yaml"), got)
		require.Equal(t, "line one\nline two\n", got["multiline"])
	})

	t.Run("KeyRulesDecideWhatIsEncrypted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, name := range []string{"regex.json", "regex-mac-only.json", "unencrypted-regex.env", "encrypted-suffix.yaml"} {
			got, err := decrypt(t, b, name, string(fixture(t, name)))
			require.NoError(t, err, name)
			require.Equal(t, execEnv(t, name), got, name)
		}
	})

	t.Run("AnyOfTheRecipientsDecrypts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := Decrypt("two-recipients.json", fixture(t, "two-recipients.json"), []Identity{b.stranger, b.second})
		require.NoError(t, err)
		require.Equal(t, execEnv(t, "two-recipients.json"), got)
	})

	t.Run("HybridPostQuantumRecipientDecrypts", func(t *testing.T) {
		t.Parallel()
		hybrid := testIdentity(t, "hybrid")
		require.True(t, strings.HasPrefix(hybrid.Recipient(), "age1pq1"), hybrid.Recipient())
		got, err := Decrypt("hybrid.json", fixture(t, "hybrid.json"), []Identity{hybrid})
		require.NoError(t, err)
		require.Equal(t, execEnv(t, "hybrid.json"), got)
		require.Equal(t, map[string]string{"PASSWORD": "hybrid-secret"}, got)
	})

	t.Run("IdentityNotARecipientIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := Decrypt("secrets/app.json", fixture(t, "app.json"), []Identity{b.stranger})
		requireRefused(t, err, ErrNoIdentity, "secrets/app.json does not decrypt with sluice's age identity")
		require.Contains(t, err.Error(), "recipients: "+b.id.Recipient()+";")
		require.Contains(t, err.Error(), "sluice's: "+b.stranger.Recipient())
		require.NotContains(t, err.Error(), b.stranger.Secret())

		_, err = Decrypt("two-recipients.json", fixture(t, "two-recipients.json"), []Identity{b.stranger})
		requireRefused(t, err, ErrNoIdentity, "recipients: "+b.id.Recipient()+", "+b.second.Recipient()+";")

		_, err = Decrypt("secrets/app.json", fixture(t, "app.json"), nil)
		requireRefused(t, err, ErrNoIdentity, "sluice holds no age identity")
	})

	t.Run("DataKeyThatIsNoAgeFileIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		_, err := decrypt(t, b, "app.json", replaceOnce(t, data, `-----BEGIN AGE ENCRYPTED FILE-----\nYWdl`, `-----BEGIN AGE ENCRYPTED FILE-----\n!Wdl`))
		requireRefused(t, err, ErrMalformed, "app.json has an age-encrypted data key that is not a valid age file")
	})

	t.Run("FileWithoutMetadataIsNotSOPS", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, name := range []string{"app.json", "app.env", "app.yaml"} {
			_, err := decrypt(t, b, name, string(fixture(t, "plain/"+name)))
			requireRefused(t, err, ErrNotSOPS, name+" is not a SOPS file (no sops metadata)")
		}
		_, err := decrypt(t, b, "empty.yaml", "")
		requireRefused(t, err, ErrNotSOPS, "empty.yaml is not a SOPS file (no sops metadata)")
	})

	t.Run("FileWithoutAgeRecipientIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		ages := regexp.MustCompile(`(?s)"age": \[.*?\],\n`).FindString(data)
		require.NotEmpty(t, ages)
		pgp := `"pgp": [{"created_at": "2026-01-01T00:00:00Z", "enc": "x", "fp": "0000"}],` + "\n"
		_, err := decrypt(t, b, "app.json", replaceOnce(t, data, ages, pgp))
		requireRefused(t, err, ErrNoAgeRecipient, "app.json has no age recipient (its data key is encrypted to pgp only)")
	})

	t.Run("ChangedCiphertextIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		for _, field := range []string{"data", "iv", "tag"} {
			_, err := decrypt(t, b, "app.json", flipByte(t, data, `"QUOTES": "`, field))
			requireRefused(t, err, ErrValue, `app.json has a value at "QUOTES" that does not decrypt with the file's data key`)
		}
		env := string(fixture(t, "app.env"))
		_, err := decrypt(t, b, "app.env", flipByte(t, env, "UNICODE=", "data"))
		requireRefused(t, err, ErrValue, `app.env has a value at "UNICODE" that does not decrypt`)
	})

	t.Run("ChangedMACIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tc := range []struct{ name, prefix string }{
			{"app.json", `"mac": "`},
			{"app.env", "sops_mac="},
			{"app.yaml", "mac: "},
		} {
			_, err := decrypt(t, b, tc.name, flipByte(t, string(fixture(t, tc.name)), tc.prefix, "data"))
			requireRefused(t, err, ErrMAC, tc.name+" does not match its MAC: the file was changed after it was encrypted")
		}
	})

	t.Run("MACOfAnotherFileIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		mine := line(t, data, `"mac": `)
		theirs := line(t, string(fixture(t, "regex.json")), `"mac": `)
		_, err := decrypt(t, b, "app.json", replaceOnce(t, data, mine, theirs))
		requireRefused(t, err, ErrMAC, "app.json does not match its MAC")
	})

	t.Run("ChangedLastModifiedIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		stamp := line(t, data, `"lastmodified": `)
		_, err := decrypt(t, b, "app.json", replaceOnce(t, data, stamp, `"lastmodified": "2020-01-01T00:00:00Z",`+"\n"))
		requireRefused(t, err, ErrMAC, "app.json does not match its MAC")
	})

	t.Run("RenamedKeyIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := decrypt(t, b, "app.json", replaceOnce(t, string(fixture(t, "app.json")), `"QUOTES":`, `"QUOTED":`))
		requireRefused(t, err, ErrValue, `app.json has a value at "QUOTED" that does not decrypt with the file's data key: the value was changed, or its key renamed or moved`)

		_, err = decrypt(t, b, "app.env", replaceOnce(t, string(fixture(t, "app.env")), "\nQUOTES=", "\nQUOTED="))
		requireRefused(t, err, ErrValue, `app.env has a value at "QUOTED" that does not decrypt`)
	})

	t.Run("ValuesSwappedBetweenKeysAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		quotes := regexp.MustCompile(`"QUOTES": ("ENC\[[^"]*")`).FindStringSubmatch(data)
		dollar := regexp.MustCompile(`"DOLLAR": ("ENC\[[^"]*")`).FindStringSubmatch(data)
		data = replaceOnce(t, data, quotes[0], `"QUOTES": `+dollar[1])
		data = replaceOnce(t, data, dollar[0], `"DOLLAR": `+quotes[1])
		_, err := decrypt(t, b, "app.json", data)
		requireRefused(t, err, ErrValue, `app.json has a value at "QUOTES" that does not decrypt`)
	})

	t.Run("ReorderedKeysAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Each value still decrypts (its path is unchanged); only the MAC,
		// over the values in order, tells.
		_, err := decrypt(t, b, "app.json", swapLines(t, string(fixture(t, "app.json")), `"QUOTES":`, `"DOLLAR":`))
		requireRefused(t, err, ErrMAC, "app.json does not match its MAC")

		_, err = decrypt(t, b, "app.env", swapLines(t, string(fixture(t, "app.env")), "QUOTES=", "DOLLAR="))
		requireRefused(t, err, ErrMAC, "app.env does not match its MAC")

		_, err = decrypt(t, b, "app.yaml", swapLines(t, string(fixture(t, "app.yaml")), "quotes:", "unicode:"))
		requireRefused(t, err, ErrMAC, "app.yaml does not match its MAC")
	})

	t.Run("AddedKeyIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		quotes := line(t, data, `"QUOTES":`)

		// A copy of another key's value does not decrypt under its new path.
		copied := strings.Replace(quotes, `"QUOTES":`, `"EXTRA":`, 1)
		_, err := decrypt(t, b, "app.json", replaceOnce(t, data, quotes, quotes+copied))
		requireRefused(t, err, ErrValue, `app.json has a value at "EXTRA" that does not decrypt`)

		// A plaintext value where sops would have encrypted one.
		_, err = decrypt(t, b, "app.json", replaceOnce(t, data, quotes, quotes+`"EXTRA": "plain",`+"\n"))
		requireRefused(t, err, ErrValue, `app.json has a value at "EXTRA" that is not an ENC[AES256_GCM,data:…,iv:…,tag:…,type:…] value`)
		_, err = decrypt(t, b, "app.json", replaceOnce(t, data, quotes, quotes+`"EXTRA": 7,`+"\n"))
		requireRefused(t, err, ErrValue, `app.json has a value at "EXTRA" that is not encrypted`)

		// A value sops leaves unencrypted is still in the MAC.
		_, err = decrypt(t, b, "app.json", replaceOnce(t, data, quotes, quotes+`"EXTRA_unencrypted": "x",`+"\n"))
		requireRefused(t, err, ErrMAC, "app.json does not match its MAC")

		env := string(fixture(t, "app.env"))
		_, err = decrypt(t, b, "app.env", env+"EXTRA_unencrypted=x\n")
		requireRefused(t, err, ErrMAC, "app.env does not match its MAC")
	})

	t.Run("RemovedKeyIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		_, err := decrypt(t, b, "app.json", replaceOnce(t, data, line(t, data, `"QUOTES":`), ""))
		requireRefused(t, err, ErrMAC, "app.json does not match its MAC")
	})

	t.Run("ChangedUnencryptedValueIsRefusedUnlessMACCoversOnlyEncrypted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := decrypt(t, b, "app.json", replaceOnce(t, string(fixture(t, "app.json")), `"eu-west-1"`, `"us-east-1"`))
		requireRefused(t, err, ErrMAC, "app.json does not match its MAC")

		_, err = decrypt(t, b, "regex.json", replaceOnce(t, string(fixture(t, "regex.json")), `"db.internal"`, `"db.example"`))
		requireRefused(t, err, ErrMAC, "regex.json does not match its MAC")

		// With mac_only_encrypted, sops leaves unencrypted values out of the
		// MAC, so an edit to one is not seen: sluice reads the file as sops.
		got, err := decrypt(t, b, "regex-mac-only.json", replaceOnce(t, string(fixture(t, "regex-mac-only.json")), `"db.internal"`, `"db.example"`))
		require.NoError(t, err)
		require.Equal(t, "db.example", got["HOST"])
		require.Equal(t, "regex-secret", got["PASSWORD"])

		// …but an encrypted one still is.
		_, err = decrypt(t, b, "regex-mac-only.json", swapLines(t, string(fixture(t, "regex-mac-only.json")), `"PASSWORD":`, `"TOKEN":`))
		requireRefused(t, err, ErrMAC, "regex-mac-only.json does not match its MAC")
	})

	t.Run("MACOnlyEncryptedCannotBeTurnedOff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := decrypt(t, b, "regex-mac-only.json", replaceOnce(t, string(fixture(t, "regex-mac-only.json")), `"mac_only_encrypted": true`, `"mac_only_encrypted": false`))
		requireRefused(t, err, ErrMAC, "regex-mac-only.json does not match its MAC")
	})

	t.Run("MalformedValueIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		quotes := line(t, data, `"QUOTES":`)
		for _, broken := range []string{
			strings.Replace(quotes, "type:str]", "type:nonsense]", 1),
			strings.Replace(quotes, ",iv:", ",iv:!!", 1),
			strings.Replace(quotes, "ENC[AES256_GCM,", "ENC[AES128_CBC,", 1),
		} {
			_, err := decrypt(t, b, "app.json", replaceOnce(t, data, quotes, broken))
			requireRefused(t, err, ErrValue, `app.json has a value at "QUOTES" that is not an ENC[AES256_GCM,data:…,iv:…,tag:…,type:…] value`)
		}

		mac := line(t, data, `"mac": `)
		_, err := decrypt(t, b, "app.json", replaceOnce(t, data, mac, `"mac": "garbage",`+"\n"))
		requireRefused(t, err, ErrMalformed, "app.json has a sops.mac that is not an ENC[AES256_GCM,…] value")

		_, err = decrypt(t, b, "app.json", data[:len(data)/2])
		requireRefused(t, err, ErrMalformed, "app.json is not valid JSON")

		env := string(fixture(t, "app.env"))
		_, err = decrypt(t, b, "app.env", "NO EQUALS SIGN\n"+env)
		requireRefused(t, err, ErrMalformed, "app.env has a line with no = (line 1)")
	})

	t.Run("NestedValueIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := decrypt(t, b, "nested.json", string(fixture(t, "nested.json")))
		requireRefused(t, err, ErrUnsupported, `nested.json holds a nested value at "db"; sluice reads only top-level strings, numbers and booleans`)
	})

	t.Run("NestedValuesAreInTheMAC", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Refused as tampered, not as nested: the MAC covers every level.
		data := string(fixture(t, "nested.json"))
		_, err := decrypt(t, b, "nested.json", swapLines(t, data, `"user":`, `"password":`))
		requireRefused(t, err, ErrMAC, "nested.json does not match its MAC")
		_, err = decrypt(t, b, "nested.json", flipByte(t, data, `"password": "`, "data"))
		requireRefused(t, err, ErrValue, `nested.json has a value at "db.password" that does not decrypt`)
	})

	t.Run("KeyGivenTwiceIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// sops encrypts both lines; which one would win is not obvious.
		_, err := decrypt(t, b, "duplicate.env", string(fixture(t, "duplicate.env")))
		requireRefused(t, err, ErrUnsupported, `duplicate.env names "PASSWORD" twice`)
	})

	t.Run("KeyThatIsNoVariableNameIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := decrypt(t, b, "equals-key.json", string(fixture(t, "equals-key.json")))
		requireRefused(t, err, ErrUnsupported, `equals-key.json has the key "A=B", which holds = or NUL and so is no environment variable name`)
		require.NotContains(t, err.Error(), "equals-secret")
	})

	t.Run("NullIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// sops leaves nulls out of the MAC, so an added one passes it.
		data := string(fixture(t, "app.json"))
		quotes := line(t, data, `"QUOTES":`)
		_, err := decrypt(t, b, "app.json", replaceOnce(t, data, quotes, quotes+`"NOTHING": null,`+"\n"))
		requireRefused(t, err, ErrUnsupported, `app.json holds null at "NOTHING"`)
	})

	t.Run("KeyGroupsAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := decrypt(t, b, "shamir.json", string(fixture(t, "shamir.json")))
		requireRefused(t, err, ErrUnsupported, "shamir.json uses key groups (Shamir's secret sharing), which sluice does not read")
	})

	t.Run("CommentRegexIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		_, err := decrypt(t, b, "app.json", replaceOnce(t, data, `"unencrypted_suffix": "_unencrypted",`, `"encrypted_comment_regex": "sops:enc",`))
		requireRefused(t, err, ErrUnsupported, "app.json uses sops.encrypted_comment_regex, which sluice does not read")
	})

	t.Run("TwoYAMLDocumentsAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "two-documents.yaml"))
		_, err := decrypt(t, b, "two-documents.yaml", data)
		requireRefused(t, err, ErrUnsupported, "two-documents.yaml holds 2 YAML documents; sluice reads a file of one")

		// The MAC covers both documents: without the second, the first
		// alone does not match it.
		first, _, ok := strings.Cut(data, "\n---\n")
		require.True(t, ok)
		_, err = decrypt(t, b, "two-documents.yaml", first)
		requireRefused(t, err, ErrMAC, "two-documents.yaml does not match its MAC")
	})

	t.Run("NameOfNoFormatIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := decrypt(t, b, "app.txt", string(fixture(t, "app.json")))
		requireRefused(t, err, ErrUnsupported, "app.txt is not a SOPS file sluice reads: name it .json, .env, .yaml or .yml")
	})

	t.Run("ErrorsAreOneSentence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := string(fixture(t, "app.json"))
		for _, tampered := range []string{
			flipByte(t, data, `"QUOTES": "`, "data"),
			flipByte(t, data, `"mac": "`, "data"),
			swapLines(t, data, `"QUOTES":`, `"DOLLAR":`),
		} {
			_, err := decrypt(t, b, "app.json", tampered)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "\n")
			require.True(t, strings.HasPrefix(err.Error(), "app.json "), err.Error())
			require.Equal(t, 1, strings.Count(err.Error(), "app.json"), err.Error())
		}
	})
}

func TestFormatFor(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name   string
		format Format
		ok     bool
	}{
		{"secrets/app.json", JSON, true},
		{"app.env", Dotenv, true},
		{".env", Dotenv, true},
		{"app.yaml", YAML, true},
		{"app.yml", YAML, true},
		{"app.JSON", "", false},
		{"app.ini", "", false},
		{"app.json.bak", "", false},
	} {
		format, ok := FormatFor(tc.name)
		require.Equal(t, tc.format, format, tc.name)
		require.Equal(t, tc.ok, ok, tc.name)
	}
}
