package terraform

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
)

func TestSchemaFor(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0b9c6a1e-5f2d-4c11-9a3e-77d0c1e2f3a4")
	require.Equal(t, "sluice_tf_0b9c6a1e5f2d4c119a3e77d0c1e2f3a4", SchemaFor(id))
	require.Equal(t, SchemaFor(id), SchemaFor(id))
	require.NotEqual(t, SchemaFor(id), SchemaFor(uuid.New()))
	require.Regexp(t, schemaRE, SchemaFor(uuid.New()))
}

func TestWriteRoot(t *testing.T) {
	t.Parallel()

	schema := SchemaFor(uuid.MustParse("0b9c6a1e-5f2d-4c11-9a3e-77d0c1e2f3a4"))
	valid := func(dir string) Root {
		return Root{
			Dir:          dir,
			ModuleSource: "../module",
			Schema:       schema,
			Inputs: map[string]json.RawMessage{
				"cidr":  json.RawMessage(`"10.0.0.0/16"`),
				"zones": json.RawMessage(`["a", "b"]`),
				"size":  json.RawMessage(`12345678901234567890`),
				"tags":  json.RawMessage(`{"team": "net", "cost-center": "<42>&"}`),
			},
		}
	}

	t.Run("WritesTheBackendAndTheModuleCall", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "root")
		require.NoError(t, WriteRoot(valid(dir)))
		data, err := os.ReadFile(filepath.Join(dir, RootFile))
		require.NoError(t, err)
		require.Equal(t, `{
  "module": {
    "main": {
      "cidr": "10.0.0.0/16",
      "size": 12345678901234567890,
      "source": "../module",
      "tags": {
        "cost-center": "<42>&",
        "team": "net"
      },
      "zones": [
        "a",
        "b"
      ]
    }
  },
  "terraform": {
    "backend": {
      "pg": {
        "schema_name": "sluice_tf_0b9c6a1e5f2d4c119a3e77d0c1e2f3a4"
      }
    }
  }
}
`, string(data))
		fi, err := os.Stat(filepath.Join(dir, RootFile))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	})

	t.Run("IsDeterministicAndReplacesTheFile", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		r := valid(dir)
		require.NoError(t, WriteRoot(r))
		first, err := os.ReadFile(filepath.Join(dir, RootFile))
		require.NoError(t, err)
		for range 20 {
			require.NoError(t, WriteRoot(r))
			again, err := os.ReadFile(filepath.Join(dir, RootFile))
			require.NoError(t, err)
			require.Equal(t, string(first), string(again))
		}

		r.Inputs = map[string]json.RawMessage{"cidr": json.RawMessage(`"10.9.0.0/16"`)}
		require.NoError(t, WriteRoot(r))
		data, err := os.ReadFile(filepath.Join(dir, RootFile))
		require.NoError(t, err)
		require.Contains(t, string(data), "10.9.0.0/16")
		require.NotContains(t, string(data), "zones")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file is left behind")
	})

	t.Run("RefusesWhatTerraformWouldMisread", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name string
			edit func(r *Root)
			want string // in the message
		}{
			{"ReservedSource", func(r *Root) { r.Inputs["source"] = json.RawMessage(`"x"`) }, `"source" is a reserved module argument`},
			{"ReservedVersion", func(r *Root) { r.Inputs["version"] = json.RawMessage(`"1"`) }, `"version" is a reserved`},
			{"ReservedProviders", func(r *Root) { r.Inputs["providers"] = json.RawMessage(`{}`) }, `"providers" is a reserved`},
			{"ReservedCount", func(r *Root) { r.Inputs["count"] = json.RawMessage(`1`) }, `"count" is a reserved`},
			{"ReservedForEach", func(r *Root) { r.Inputs["for_each"] = json.RawMessage(`[]`) }, `"for_each" is a reserved`},
			{"ReservedDependsOn", func(r *Root) { r.Inputs["depends_on"] = json.RawMessage(`[]`) }, `"depends_on" is a reserved`},
			{"InputWithADot", func(r *Root) { r.Inputs["a.b"] = json.RawMessage(`1`) }, `"a.b" is not a valid Terraform identifier`},
			{"InputStartingWithADigit", func(r *Root) { r.Inputs["1st"] = json.RawMessage(`1`) }, `"1st" is not a valid`},
			{"EmptyInputName", func(r *Root) { r.Inputs[""] = json.RawMessage(`1`) }, `"" is not a valid`},
			{"CommentKey", func(r *Root) { r.Inputs["//"] = json.RawMessage(`"x"`) }, `"//" is not a valid`},
			{"InvalidJSON", func(r *Root) { r.Inputs["cidr"] = json.RawMessage(`{`) }, `"cidr" is not valid JSON`},
			{"TwoJSONValues", func(r *Root) { r.Inputs["cidr"] = json.RawMessage(`1 2`) }, `"cidr" is not valid JSON`},
			{"RegistrySource", func(r *Root) { r.ModuleSource = "hashicorp/consul/aws" }, "is not a local path"},
			{"AbsoluteSource", func(r *Root) { r.ModuleSource = "/srv/modules/net" }, "is not a local path"},
			{"GitSource", func(r *Root) { r.ModuleSource = "git::https://example.com/m.git" }, "is not a local path"},
			{"UpperCaseSchema", func(r *Root) { r.Schema = "Sluice_tf" }, "is not a plain lower-case PostgreSQL identifier"},
			{"SchemaWithSQL", func(r *Root) { r.Schema = "s; DROP TABLE x" }, "is not a plain lower-case"},
			{"LongSchema", func(r *Root) { r.Schema = strings.Repeat("s", 64) }, "is not a plain lower-case"},
			{"NoDir", func(r *Root) { r.Dir = "" }, "has no directory"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				r := valid(dir)
				tc.edit(&r)
				err := WriteRoot(r)
				require.True(t, errs.Is(err, errs.Invalid), "%v", err)
				require.Contains(t, err.Error(), tc.want)
				require.NoFileExists(t, filepath.Join(dir, RootFile))
			})
		}
	})

	t.Run("DeclaresVariablesAndPassesThemWithoutTheirValues", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		r := Root{
			Dir: dir, ModuleSource: "../module", Schema: schema,
			Inputs:    map[string]json.RawMessage{"cidr": json.RawMessage(`"10.0.0.0/16"`)},
			Variables: map[string]Variable{"password": {Sensitive: true}, "region": {}},
		}
		require.NoError(t, WriteRoot(r))
		data, err := os.ReadFile(filepath.Join(dir, RootFile))
		require.NoError(t, err)
		require.Equal(t, `{
  "module": {
    "main": {
      "cidr": "10.0.0.0/16",
      "password": "${var.password}",
      "region": "${var.region}",
      "source": "../module"
    }
  },
  "terraform": {
    "backend": {
      "pg": {
        "schema_name": "sluice_tf_0b9c6a1e5f2d4c119a3e77d0c1e2f3a4"
      }
    }
  },
  "variable": {
    "password": {
      "sensitive": true,
      "type": "string"
    },
    "region": {
      "type": "string"
    }
  }
}
`, string(data))
		require.Equal(t, "TF_VAR_password=a=b\nc", VarEnv("password", "a=b\nc"))

		for name, want := range map[string]string{
			"locals": `The variable "locals" is a reserved name`,
			"count":  `The variable "count" is a reserved name`,
			"a.b":    `The variable "a.b" is not a valid Terraform identifier`,
			"cidr":   `The module argument "cidr" is both an input and a variable`,
		} {
			r.Variables = map[string]Variable{name: {Sensitive: true}}
			err := WriteRoot(r)
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			require.ErrorContains(t, err, want)
		}
	})

	t.Run("AcceptsDashesAndNull", func(t *testing.T) {
		t.Parallel()
		r := valid(t.TempDir())
		r.Inputs["instance-type"] = json.RawMessage(`null`)
		r.Inputs["_private"] = json.RawMessage(`true`)
		r.ModuleSource = "./modules/net"
		require.NoError(t, WriteRoot(r))
	})
}

func TestEscapeTemplate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain":              "plain",
		"$x %x $ % 100%":     "$x %x $ % 100%",
		"${var.x}":           "$${var.x}",
		"%{ if true }%{end}": "%%{ if true }%%{end}",
		"a$${b":              "a$$${b", // terraform reads "$$" + "${" as "$" and "${": a$${b again
		"%%{":                "%%%{",
	} {
		require.Equal(t, want, escapeTemplate(in), "escapeTemplate(%q)", in)
	}
}

func TestRedactForms(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"plain-value"}, RedactForms("plain-value"))
	require.Equal(t, []string{
		"pw-one\n  $HOME \"q\" ${x}",
		"pw-one", "pw-one",
		`  $HOME "q" ${x}`, `$HOME "q" ${x}`,
		`pw-one\n  $HOME \"q\" $${x}`,
		`pw-one\n  $HOME \"q\" ${x}`,
	}, RedactForms("pw-one\n  $HOME \"q\" ${x}"))
}
