package httpapi

import (
	"encoding/base64"
	"strings"

	"github.com/google/uuid"

	"sluice/internal/errs"
)

// A cursor is the sort key of the last item of a page followed by its id,
// opaque to clients: base64url of "key\x00id".

func encodeCursor(key string, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key + "\x00" + id.String()))
}

func decodeCursor(s string) (string, uuid.UUID, error) {
	bad := errs.Errorf(errs.Invalid, "The cursor is not one this server gave out; start again without it.")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", uuid.Nil, bad
	}
	key, rawID, ok := strings.Cut(string(b), "\x00")
	if !ok {
		return "", uuid.Nil, bad
	}
	id, err := uuid.Parse(rawID)
	if err != nil {
		return "", uuid.Nil, bad
	}
	return key, id, nil
}
