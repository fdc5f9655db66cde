package httpapi

import (
	"runtime"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/require"
)

func TestScanJSON(t *testing.T) {
	t.Parallel()

	t.Run("ItsWorkGrowsWithTheBodyNotItsDepthSquared", func(t *testing.T) {
		t.Parallel()
		// 9,000 deep, under encoding/json's limit, so scanned to the end. A
		// location built per value allocated the depth squared: about
		// 120 MB here.
		deep := []byte(strings.Repeat("[", 9_000) + `"a"` + strings.Repeat("]", 9_000))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		require.Empty(t, scanJSON(deep, false))
		runtime.ReadMemStats(&after)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20))
	})

	t.Run("RefusalsAreNamedByTheirPlace", func(t *testing.T) {
		t.Parallel()
		got := scanJSON([]byte(`{"a":[1,{"b":"x\u0000y"}],"a":2,"c\u0001":3}`), false)
		var locs []string
		for _, e := range got {
			locs = append(locs, e.(*huma.ErrorDetail).Location)
		}
		require.Equal(t, []string{"body.a[1].b", "body.a", "body"}, locs)
	})

	t.Run("AtMostTwentyRefusals", func(t *testing.T) {
		t.Parallel()
		body := "[" + strings.TrimSuffix(strings.Repeat(`"a\u0000",`, 1000), ",") + "]"
		got := scanJSON([]byte(body), false)
		require.Equal(t, maxRefused, len(got))
		require.Equal(t, "body[19]", got[19].(*huma.ErrorDetail).Location)
	})
}
