package httpapi

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"sluice/internal/errs"
)

// A cursor is the sort key of the last item of a page followed by its id,
// opaque to clients: base64url of "key\x00id".

func encodeCursor(key string, id uuid.UUID) string {
	return encodeCursorPair(key, id.String())
}

func decodeCursor(s string) (string, uuid.UUID, error) {
	key, rawID, err := decodeCursorPair(s)
	if err != nil {
		return "", uuid.Nil, err
	}
	id, err := uuid.Parse(rawID)
	if err != nil {
		return "", uuid.Nil, errBadCursor()
	}
	return key, id, nil
}

// encodeCursorPair is a cursor of a sort key and the last item's own key,
// for lists whose items have no uuid (artifacts, by digest).
func encodeCursorPair(key, last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key + "\x00" + last))
}

func decodeCursorPair(s string) (key, last string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", "", errBadCursor()
	}
	key, last, ok := strings.Cut(string(b), "\x00")
	// PostgreSQL holds no NUL and no text that is not UTF-8, and refuses
	// such a parameter: no cursor this server gave out has one.
	if !ok || !utf8.ValidString(key) || !utf8.ValidString(last) || strings.ContainsRune(last, 0) {
		return "", "", errBadCursor()
	}
	return key, last, nil
}

func errBadCursor() error {
	return errs.Errorf(errs.Invalid, "The cursor is not one this server gave out; start again without it.")
}
