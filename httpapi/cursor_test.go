package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCursors(t *testing.T) {
	t.Parallel()

	t.Run("AKeyPostgreSQLCannotHoldIsRefusedNotA500", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, serverOpts{})
		// The shape of a cursor, key NUL id, with a key that is not UTF-8:
		// PostgreSQL refuses it as a text parameter.
		bad := base64.RawURLEncoding.EncodeToString([]byte("apps/\xff.json\x0000000000-0000-4000-8000-000000000000"))
		for _, path := range []string{"/api/v1/units", "/api/v1/services", "/api/v1/applications"} {
			p := s.get(t, path+"?cursor="+bad, s.viewer).problem(t, http.StatusUnprocessableEntity)
			require.Contains(t, p.Detail, "The cursor is not one this server gave out", path)
		}
	})
}
