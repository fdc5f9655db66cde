// Package errs is sluice's error vocabulary. Domain packages return an
// *Error with a Code and a message written for the operator; the HTTP API
// maps the Code to a status in one place and shows the message as it is.
// Any other error is internal: the API answers a generic 500 and the server
// log keeps the (redacted) detail.
package errs

import (
	"errors"
	"fmt"
)

// Code classifies an error for the API boundary.
type Code string

// The codes. Each maps to one HTTP status in httpapi.
const (
	Invalid      Code = "invalid"      // 422: the request is well-formed but wrong
	NotFound     Code = "not_found"    // 404
	Conflict     Code = "conflict"     // 409: the current state refuses the request
	Unauthorized Code = "unauthorized" // 401
	Forbidden    Code = "forbidden"    // 403
	Unavailable  Code = "unavailable"  // 503: a dependency is missing or down
)

// Error is an error whose Message is safe to show to the operator.
type Error struct {
	Code    Code
	Message string // a full sentence that says what to do next
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns err's Code, or "" when err is not an *Error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Is reports whether err carries code.
func Is(err error, code Code) bool { return CodeOf(err) == code }

// MessageOf is the sentence of the *Error err carries, without what wraps
// it; err's own text when it carries none.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
