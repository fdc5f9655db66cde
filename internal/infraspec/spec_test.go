package infraspec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()

	unit := func(spec string) []byte {
		return []byte(`{"kind":"Infrastructure","metadata":{"name":"n"},"spec":` + spec + `}`)
	}
	s, err := Parse(unit(`{"module":"infra/modules/network","inputs":{"cidr":"10.0.0.0/16","zones":["a","b"]},"autoApply":true}`))
	require.NoError(t, err)
	require.Equal(t, "infra/modules/network", s.Module)
	require.JSONEq(t, `["a","b"]`, string(s.Inputs["zones"]))
	require.True(t, s.AutoApply)

	for _, tc := range []struct{ spec, want string }{
		{`null`, `has no "spec"`},
		{`{}`, `has no "spec.module"`},
		{`{"module":"/etc"}`, "relative path"},
		{`{"module":"../outside"}`, "not a clean path"},
		{`{"module":"a/../../b"}`, "not a clean path"},
		{`{"module":"a/"}`, "not a clean path"},
		{`{"module":"."}`, "not a clean path"},
		{`{"module":"archive/x"}`, "archive/"},
		{`{"module":".git/hooks"}`, ".git/"},
		{`{"module":"https://example.com/m"}`, "relative path"},
		{`{"module":"m","inputs":{"source":"x"}}`, `input "source"`},
		{`{"module":"m","inputs":{"count":1}}`, `input "count"`},
		{`{"module":"m","inputs":{"1bad":1}}`, `input "1bad"`},
		{`{"module":"m","input":{}}`, `unknown field "input"`},
		{`{"module":7}`, "does not read as infrastructure"},
	} {
		_, err := Parse(unit(tc.spec))
		require.Error(t, err, tc.spec)
		require.Contains(t, err.Error(), tc.want, tc.spec)
	}
}
