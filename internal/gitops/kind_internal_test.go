package gitops

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNearKind(t *testing.T) {
	t.Parallel()

	for kind, want := range map[string]string{
		"Servcie": "Service", "service": "Service", "SERVICE": "Service", "Servic": "Service", "Services": "Service",
		"Sevrice": "Service", "Infrastucture": "Infrastructure", "infra-structure": "Infrastructure",
		"Bluepritn": "Blueprint", "BluePrint": "Blueprint",
		// Other kinds are data, not typos.
		"Config": "", "Database": "", "Queue": "", "Secret": "", "Serv": "", "S": "", "Device": "", "Policy": "",
	} {
		require.Equal(t, want, nearKind(kind), "%q", kind)
	}
	require.Equal(t, 0, editDistance("abc", "abc"))
	require.Equal(t, 1, editDistance("abcd", "abdc"), "a swap is one edit")
	require.Equal(t, 3, editDistance("", "abc"))
	require.Equal(t, 2, editDistance("kitten", "sitteng"))
}
