package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// parseFlags parses fs's flags wherever they stand among args: before,
// between and after the positional arguments, which it returns in order.
// The flag package stops at the first argument that is not a flag; this
// takes that argument and parses on. "--" ends the flags: what follows it
// is positional, even where it starts with '-'.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if endedByDashes(fs, args, len(args)-len(rest)) {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			break
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
	return positional, nil
}

// endedByDashes reports whether a parse that took the first n of args
// stopped at "--", rather than at the first positional argument or the end.
// A "--" that was a flag's value (--reason --) ends nothing.
func endedByDashes(fs *flag.FlagSet, args []string, n int) bool {
	if n == 0 || args[n-1] != "--" {
		return false
	}
	return n < 2 || !takesValue(fs, args[n-2])
}

// takesValue reports whether arg names one of fs's flags that takes the
// next argument as its value: not a bool flag, and no "=" of its own.
func takesValue(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimPrefix(name, "-"))
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// parseArgs parses flags anywhere among exactly n positional arguments; a
// wrong count is the usage line as an error.
func parseArgs(fs *flag.FlagSet, args []string, n int, usage string) ([]string, error) {
	positional, err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	if len(positional) != n {
		return nil, errors.New("usage: sluice " + usage)
	}
	return positional, nil
}

func parseOneArg(fs *flag.FlagSet, args []string, usage string) (string, error) {
	got, err := parseArgs(fs, args, 1, usage)
	if err != nil {
		return "", err
	}
	return got[0], nil
}

// parseNoArgs parses the flags of a command that takes no argument, and
// refuses one, so that a stray word cannot hide the flags after it.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	positional, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(positional) > 0 {
		return fmt.Errorf("%s takes no arguments, not %q; run \"sluice %s -h\" for its flags", fs.Name(), positional[0], fs.Name())
	}
	return nil
}
