package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	t.Parallel()

	t.Run("PrintsTheBuildInfoAsTextAndJSON", func(t *testing.T) {
		t.Parallel()
		var out, errOut bytes.Buffer
		require.NoError(t, Run(context.Background(), []string{"version"}, &out, &errOut), errOut.String())
		info := buildinfo.Get()
		require.Regexp(t, `(?m)^version +`+regexp.QuoteMeta(info.Version)+`$`, out.String())
		require.Regexp(t, `(?m)^revision +`+regexp.QuoteMeta(info.Revision)+`( \(modified\))?$`, out.String())
		require.Regexp(t, `(?m)^go +`+regexp.QuoteMeta(runtime.Version())+`$`, out.String())

		out.Reset()
		require.NoError(t, Run(context.Background(), []string{"version", "-o", "json"}, &out, &errOut))
		var got buildinfo.Info
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		require.Equal(t, info, got)
	})

	t.Run("RefusesAnArgument", func(t *testing.T) {
		t.Parallel()
		var out, errOut bytes.Buffer
		require.ErrorContains(t, Run(context.Background(), []string{"version", "now"}, &out, &errOut), "no arguments")
	})

	// make build links with -buildvcs=true in a checkout, and VERSION=… sets
	// the version: the binary then names its commit.
	t.Run("ABinaryBuiltFromACheckoutNamesItsCommit", func(t *testing.T) {
		t.Parallel()
		head, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Skipf("not a git checkout: %v", err)
		}
		bin := filepath.Join(t.TempDir(), "sluice")
		build := exec.Command("go", "build", "-buildvcs=true", "-ldflags", "-X sluice/internal/buildinfo.version=v9.8.7-test", "-o", bin, ".")
		out, err := build.CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command(bin, "version", "--json").Output()
		require.NoError(t, err)
		var got buildinfo.Info
		require.NoError(t, json.Unmarshal(out, &got))
		require.Equal(t, "v9.8.7-test", got.Version)
		require.Equal(t, strings.TrimSpace(string(head)), got.Revision)
		require.False(t, got.Time.IsZero())
		require.Equal(t, runtime.Version(), got.GoVersion)
	})
}
