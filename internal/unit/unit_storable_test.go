package unit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The inventory keeps a unit's content as jsonb and its kind and name as
// text, and PostgreSQL refuses a NUL character in either and a number beyond
// its numeric type. Such a file used to parse, and then failed the write of
// the whole sync; now it is refused on its own.
func TestParseRefusesWhatTheInventoryCannotStore(t *testing.T) {
	t.Parallel()

	const head = `{"kind": "Service", "metadata": {"name": "web"}, "spec": `
	tests := []struct{ name, spec, want string }{
		{"NULInAString", `{"args": ["ok", "a\u0000b"]}`, `has a NUL character (\u0000) at "spec.args[1]", which the inventory cannot store; remove it`},
		{"NULInAKey", `{"env": {"A\u0000": "x"}}`, `has a key with a NUL character (\u0000) at "spec.env.A\x00", which the inventory cannot store; rename the key`},
		{"NULInNestedArrays", `[[1, ["\u0000"]]]`, `has a NUL character (\u0000) at "spec[0][1][0]", which the inventory cannot store; remove it`},
		{"FirstProblemInKeyOrder", `{"b": "\u0000", "a": 1e131072}`, `has a number with more than 131072 digits before the decimal point or 16383 after at "spec.a", which the inventory cannot store; write it as a string`},
		{"HugeExponent", `1e131072`, `has a number with more than 131072 digits before the decimal point or 16383 after at "spec", which the inventory cannot store; write it as a string`},
		{"TinyExponent", `-1.5e-16383`, `has a number with more than 131072 digits before the decimal point or 16383 after at "spec", which the inventory cannot store; write it as a string`},
		{"ZeroWithTooManyDecimals", `0e-16384`, `has a number with more than 131072 digits before the decimal point or 16383 after at "spec", which the inventory cannot store; write it as a string`},
		{"ExponentBeyondInt64", `0e99999999999999999999`, `has a number with more than 131072 digits before the decimal point or 16383 after at "spec", which the inventory cannot store; write it as a string`},
		{"TooManyDigits", "1" + strings.Repeat("0", 131072), `has a number with more than 131072 digits before the decimal point or 16383 after at "spec", which the inventory cannot store; write it as a string`},
	}
	for _, tt := range tests {
		_, err := Parse("apps/web.json", []byte(head+tt.spec+"}"))
		require.EqualError(t, err, "apps/web.json: "+tt.want, tt.name)
	}

	t.Run("NULInTheNameToo", func(t *testing.T) {
		t.Parallel()

		_, err := Parse("a.json", []byte(`{"kind": "Service", "metadata": {"name": "w\u0000eb"}}`))
		require.EqualError(t, err, `a.json: has a NUL character (\u0000) at "metadata.name", which the inventory cannot store; remove it`)
	})

	t.Run("KeepsWhatPostgreSQLHolds", func(t *testing.T) {
		t.Parallel()

		// The edges of numeric, each checked against PostgreSQL 15: these
		// are stored, one step further is refused.
		for _, n := range []string{
			"1e131071", "9.9e131071", "1.0e131071", "1" + strings.Repeat("0", 131071) + ".5",
			"1e-16383", "0." + strings.Repeat("0", 16382) + "1", "0e99999999", "1E+00000000000000000003",
			"-0", "12345678901234567890", `"\u0001 \ud800"`,
		} {
			u, err := Parse("a.json", []byte(head+n+"}"))
			require.NoError(t, err, n)
			require.Contains(t, string(u.Content), `"spec":`, n)
		}
	})
}
