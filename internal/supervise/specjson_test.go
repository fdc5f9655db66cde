package supervise

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSpecJSONKeepsEveryByte(t *testing.T) {
	t.Parallel()

	spec := Spec{
		Exec:        "/srv/caf\xe9/bin",
		Args:        []string{"plain", "\xff\xfe", ""},
		Env:         map[string]string{"A": "é", "B": "caf\xe9", "C": `{"base64": "QQ=="}`},
		WorkDir:     "/srv/\x80",
		StopTimeout: 3 * time.Second,
	}
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	var got Spec
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, spec, got)
	require.NotEqual(t, spec.Hash(), Spec{Exec: spec.Exec, Args: []string{"plain", "\ufffd\ufffd", ""}, Env: spec.Env, WorkDir: spec.WorkDir, StopTimeout: spec.StopTimeout}.Hash(),
		"two specs that differ in bytes JSON cannot hold hash the same")

	// A spec file written before it (plain strings only) reads as it did.
	var legacy Spec
	require.NoError(t, json.Unmarshal([]byte(`{"exec":"/bin/x","args":["a"],"env":{"K":"v"},"workDir":"/w","stopTimeout":1000000000}`), &legacy))
	require.Equal(t, Spec{Exec: "/bin/x", Args: []string{"a"}, Env: map[string]string{"K": "v"}, WorkDir: "/w", StopTimeout: time.Second}, legacy)
}
