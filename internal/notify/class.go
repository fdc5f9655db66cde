package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// volatile matches the parts of an error sentence that change between two
// failures for the same reason: ids, digests, hashes, addresses, numbers
// and durations.
var volatile = regexp.MustCompile(`(?i)` +
	`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}` + // UUIDs
	`|sha256:[0-9a-f]+` + // digests
	`|\b[0-9a-f]{7,}\b` + // commits and other hashes
	`|\d+(\.\d+)*(ns|µs|us|ms|s|m|h)?\b` + // numbers, ports, durations, addresses
	`|\d+`)

// ErrorClass is the class of an error sentence: the first 12 hex digits of
// SHA-256 of the sentence with its volatile parts (ids, hashes, numbers)
// replaced, lower case and with spaces collapsed. Two failures for the same
// reason share a class even when they name different runs or ports; "" has
// the class "".
func ErrorClass(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return ""
	}
	norm := strings.Join(strings.Fields(strings.ToLower(volatile.ReplaceAllString(msg, "#"))), " ")
	sum := sha256.Sum256([]byte(norm))
	return hex.EncodeToString(sum[:6])
}
