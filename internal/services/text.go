package services

import "strings"

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
// "name@" prefix.
func repin(image, digest string) string {
	if i := strings.LastIndexByte(image, '@'); i > 0 {
		return image[:i+1] + digest
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
