package unit

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestParseFiles(t *testing.T) {
	t.Parallel()

	t.Run("GivesWhatReadFilesGivesForTheSameTree", func(t *testing.T) {
		t.Parallel()
		web := `{"kind":"Service","metadata":{"name":"web"}}`
		// A SOPS file beside the units: passed by, neither unit nor invalid.
		sopsJSON := `{"PASSWORD": "ENC[AES256_GCM,data:AA==,iv:AA==,tag:AA==,type:str]", "sops": {"mac": "ENC[…]", "version": "3.13.3"}}`
		dup := `{"kind":"Service","metadata":{"name":"a","id":"0b4c3a0e-7d0c-4a5e-9d3c-5a8f1f0e2b11"}}`
		files := []File{
			{Path: "apps/web.json", Mode: 0o644, Size: int64(len(web)), Data: []byte(web)},
			{Path: "apps/run.json", Mode: 0o755, Size: int64(len(web)), Data: []byte(strings.Replace(web, "web", "run", 1))},
			{Path: "apps/broken.json", Mode: 0o644, Size: 3, Data: []byte(`{"k`)},
			{Path: "apps/link.json", Mode: fs.ModeSymlink | 0o777, Size: 8, Data: nil},
			{Path: "apps/sub.json", Mode: fs.ModeDir | 0o755},
			{Path: "apps/big.json", Mode: 0o644, Size: MaxSize + 1},
			{Path: "dup/one.json", Mode: 0o644, Size: int64(len(dup)), Data: []byte(dup)},
			{Path: "dup/two.json", Mode: 0o644, Size: int64(len(dup)), Data: []byte(dup)},
			{Path: "archive/old.json", Mode: 0o644, Size: int64(len(web)), Data: []byte(web)},
			{Path: "README.md", Mode: 0o644, Size: 2, Data: []byte("hi")},
			{Path: "apps/secrets.json", Mode: 0o644, Size: int64(len(sopsJSON)), Data: []byte(sopsJSON)},
		}

		// The same tree in a working tree, read by ReadFilesIn.
		root := t.TempDir()
		var rels []string
		for _, f := range files {
			full := filepath.Join(root, filepath.FromSlash(f.Path))
			require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
			rels = append(rels, f.Path)
			switch {
			case f.Mode&fs.ModeSymlink != 0:
				require.NoError(t, os.Symlink("web.json", full))
			case f.Mode.IsDir():
				require.NoError(t, os.Mkdir(full, 0o755))
			case f.Data == nil:
				require.NoError(t, os.WriteFile(full, []byte(strings.Repeat(" ", int(f.Size))), 0o644))
			default:
				require.NoError(t, os.WriteFile(full, f.Data, f.Mode.Perm()))
			}
		}
		ns := uuid.MustParse("6f1d6a51-3a53-4a43-9e1a-3c0a47a7a2f1")
		wantUnits, wantInvalid, err := ReadFilesIn(root, ns, rels)
		require.NoError(t, err)

		units, invalid := ParseFiles(ns, files)
		require.Equal(t, wantInvalid, invalid)
		require.Equal(t, wantUnits, units)
		require.Equal(t, []string{"apps/run.json", "apps/web.json"}, paths(units))
		require.Equal(t, []string{"apps/big.json", "apps/broken.json", "apps/link.json", "apps/sub.json", "dup/one.json", "dup/two.json"}, pathsOf(invalid))
	})

	t.Run("AnUncleanPathIsInvalid", func(t *testing.T) {
		t.Parallel()
		units, invalid := ParseFiles(uuid.NameSpaceDNS, []File{{Path: "../x.json", Mode: 0o644, Data: []byte("{}")}, {Path: "../x.md"}})
		require.Empty(t, units)
		require.Equal(t, []Invalid{{Path: "../x.json", Reason: "is not a clean repository-relative path"}}, invalid)
	})
}

// BenchmarkParseFiles10k is what a first sync now pays to turn 10,000 units
// into rows: parsing from the blobs in memory, against BenchmarkWalk10k's
// reading them back from a working tree and BenchmarkHash10k's floor.
func BenchmarkParseFiles10k(b *testing.B) {
	b.StopTimer()
	root, rels := writeUnits(b, 10_000)
	files := make([]File, len(rels))
	for i, rel := range rels {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			b.Fatal(err)
		}
		files[i] = File{Path: rel, Mode: 0o644, Size: int64(len(data)), Data: data}
	}
	b.StartTimer()

	for b.Loop() {
		units, invalid := ParseFiles(uuid.NameSpaceDNS, files)
		if len(units) != 10_000 || len(invalid) != 0 {
			b.Fatalf("units=%d invalid=%v", len(units), invalid)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/file")
}

func TestIsSOPSDocument(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]bool{
		`{"A": "ENC[…]", "sops": {"mac": "ENC[…]"}}`:        true,
		`{"kind": "Service", "sops": {"mac": "x"}}`:         false, // a unit, whatever else it holds
		`{"A": "x", "sops": {"version": "3"}}`:              false, // no MAC: not what sops writes
		`{"A": "x", "sops": "yes"}`:                         false,
		`{"kind": "Service", "metadata": {"name": "sops"}}`: false,
		`{"sops": {"mac": "x"`:                              false,
		`["sops"]`:                                          false,
	} {
		require.Equal(t, want, IsSOPSDocument([]byte(doc)), doc)
	}
}
