package services

import (
	"strings"

	"sluice/internal/imageref"
)

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orNone(d string) string {
	if d == "" {
		return "nothing"
	}
	return d
}

// repin returns image (as written in the unit) pinned to digest, keeping a
// "name@" prefix; an image named by tag becomes its repository at digest,
// since a deploy pins what it deploys.
func repin(image, digest string) string {
	if i := strings.LastIndexByte(image, '@'); i > 0 {
		return image[:i+1] + digest
	}
	if imageref.IsTag(image) {
		return imageref.Repository(image) + "@" + digest
	}
	return digest
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func trimDot(s string) string { return strings.TrimRight(s, ". ") }

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
