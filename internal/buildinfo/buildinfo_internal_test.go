package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRead(t *testing.T) {
	t.Parallel()

	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "sluice", Version: "v0.0.0-20261203155334-35336934bc4c+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "35336934bc4c6b404802009b2753c3f6258c680a"},
			{Key: "vcs.time", Value: "2026-12-03T15:53:34Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}

	t.Run("TakesTheModuleVersionAndTheCommit", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, Info{
			Version:   "v0.0.0-20261203155334-35336934bc4c+dirty",
			Revision:  "35336934bc4c6b404802009b2753c3f6258c680a",
			Time:      time.Date(2026, 12, 3, 15, 53, 34, 0, time.UTC),
			Modified:  true,
			GoVersion: "go1.26.8",
		}, read(stamped, ""))
	})
	t.Run("PrefersTheLinkedVersion", func(t *testing.T) {
		t.Parallel()
		info := read(stamped, "v1.4.0")
		require.Equal(t, "v1.4.0", info.Version)
		require.Equal(t, "35336934bc4c6b404802009b2753c3f6258c680a", info.Revision)
	})
	t.Run("SaysDevelAndUnknownWhenTheBuildRecordedNothing", func(t *testing.T) {
		t.Parallel()
		bare := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "sluice", Version: "(devel)"}}
		require.Equal(t, Info{Version: "devel", Revision: "unknown", GoVersion: "go1.26.8"}, read(bare, ""))
		require.Equal(t, Info{Version: "devel", Revision: "unknown", GoVersion: runtime.Version()}, read(nil, ""))
	})
	t.Run("GetReadsThisBinary", func(t *testing.T) {
		t.Parallel()
		info := Get()
		require.Equal(t, runtime.Version(), info.GoVersion)
		require.NotEmpty(t, info.Version)
		require.NotEmpty(t, info.Revision)
	})
}
