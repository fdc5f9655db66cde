package infraspec

import (
	"encoding/json"
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
	require.Empty(t, s.SecretNames())

	s, err = Parse(unit(`{"module":"m","inputs":{"cidr":"10.0.0.0/16"},` +
		`"vars":{"db_password":{"secretRef":"db-password"},"region":"eu-west-1"},` +
		`"env":{"AWS_SECRET_ACCESS_KEY":{"secretRef":"aws-key"},"AWS_ACCESS_KEY_ID":"AKIA","TOKEN":{"secretRef":"db-password"}}}`))
	require.NoError(t, err)
	require.Equal(t, Value{SecretRef: "db-password"}, s.Vars["db_password"])
	require.Equal(t, Value{Value: "eu-west-1"}, s.Vars["region"])
	require.Equal(t, Value{SecretRef: "aws-key"}, s.Env["AWS_SECRET_ACCESS_KEY"])
	require.Equal(t, []string{"aws-key", "db-password"}, s.SecretNames())
	b, err := json.Marshal(s.Vars)
	require.NoError(t, err)
	require.JSONEq(t, `{"db_password":{"secretRef":"db-password"},"region":"eu-west-1"}`, string(b), "a spec reads back as it was written")

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
		{`{"module":"m","inputs":{"locals":1}}`, `input "locals"`},
		{`{"module":"m","vars":{"lifecycle":"x"}}`, `var "lifecycle", which cannot be a module argument`},
		{`{"module":"m","vars":{"a.b":"x"}}`, `var "a.b", which cannot be a module argument`},
		{`{"module":"m","inputs":{"pw":"x"},"vars":{"pw":{"secretRef":"db"}}}`, `has "pw" both in "inputs" and in "vars"`},
		{`{"module":"m","vars":{"pw":{"secretRef":"Bad Name"}}}`, `"secretRef" "Bad Name" is not a secret's name`},
		{`{"module":"m","vars":{"pw":{"secretRef":"db","version":2}}}`, `a value is a string, {"secretRef": "<secret name>"} or {"sopsFile": "<path>", "key": "<key>"}`},
		{`{"module":"m","vars":{"pw":5}}`, `a value is a string, {"secretRef": "<secret name>"} or {"sopsFile": "<path>", "key": "<key>"}, not 5`},
		{`{"module":"m","vars":{"pw":"a\u0000b"}}`, `has var pw with a NUL character`},
		{`{"module":"m","env":{"PATH":"/tmp"}}`, `has env PATH, which sluice sets itself`},
		{`{"module":"m","env":{"HOME":"/"}}`, `has env HOME, which sluice sets itself`},
		{`{"module":"m","env":{"TMPDIR":{"secretRef":"t"}}}`, `has env TMPDIR, which sluice sets itself`},
		{`{"module":"m","env":{"PG_CONN_STR":"x"}}`, `has env PG_CONN_STR, which sluice sets itself (it is the connection of the pg backend`},
		{`{"module":"m","env":{"TF_VAR_pw":"x"}}`, `has env TF_VAR_pw; names starting with TF_ configure terraform itself`},
		{`{"module":"m","env":{"TF_LOG":"trace"}}`, `has env TF_LOG; names starting with TF_`},
		{`{"module":"m","env":{"tf_cli_args":"x"}}`, `has env tf_cli_args; names starting with TF_`},
		{`{"module":"m","env":{"AWS-KEY":"x"}}`, `has env "AWS-KEY", which is not an environment variable's name`},
		{`{"module":"m","env":{"1X":"x"}}`, `has env "1X", which is not an environment variable's name`},
		{`{"module":"m","env":{"A=B":"x"}}`, `has env "A=B", which is not an environment variable's name`},
		{`{"module":"m","env":{"K":"a\u0000b"}}`, `has env K with a NUL character`},
	} {
		_, err := Parse(unit(tc.spec))
		require.Error(t, err, tc.spec)
		require.Contains(t, err.Error(), tc.want, tc.spec)
	}
}
