package servicespec_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/servicespec"
)

func TestParseCompose(t *testing.T) {
	t.Parallel()

	digest := "sha256:" + strings.Repeat("ab", 32)
	unit := func(spec string) []byte {
		return fmt.Appendf(nil, `{"kind": "Service", "metadata": {"name": "web"}, "spec": {"runtime": "compose"%s}}`, spec)
	}
	for name, tt := range map[string]struct {
		spec, wantErr string
	}{
		"FilesAndPins": {spec: `, "compose": {"files": ["stacks/web/compose.yaml", "stacks/web/prod.yaml"], "envFiles": ["stacks/web/.env"],
			"images": {"web": "r.example/web@` + digest + `"}}`},
		"NoFiles":            {spec: `, "compose": {}`, wantErr: `without "spec.compose.files"`},
		"NoCompose":          {spec: ``, wantErr: `without "spec.compose.files"`},
		"AnImage":            {spec: `, "image": "` + digest + `", "compose": {"files": ["c.yaml"]}`, wantErr: `has "spec.image" under runtime "compose"`},
		"AnAbsolutePath":     {spec: `, "compose": {"files": ["/etc/c.yaml"]}`, wantErr: `has "/etc/c.yaml" in "spec.compose.files", which is not a relative path`},
		"ATraversal":         {spec: `, "compose": {"files": ["../c.yaml"]}`, wantErr: `which is not a clean path inside the repository`},
		"AnEnvFileTraversal": {spec: `, "compose": {"files": ["c.yaml"], "envFiles": ["a/../../.env"]}`, wantErr: `in "spec.compose.envFiles", which is not a clean path`},
		"TwiceTheSameFile":   {spec: `, "compose": {"files": ["c.yaml", "c.yaml"]}`, wantErr: `names c.yaml twice`},
		"ABadProjectDir":     {spec: `, "compose": {"files": ["c.yaml"], "projectDirectory": "/srv"}`, wantErr: `"spec.compose.projectDirectory" "/srv"`},
		"APinByTag":          {spec: `, "compose": {"files": ["c.yaml"], "images": {"web": "r.example/web:v1"}}`, wantErr: `pins Compose service web to "r.example/web:v1"`},
		"Args":               {spec: `, "args": ["x"], "compose": {"files": ["c.yaml"]}`, wantErr: `has "spec.args" under runtime "compose"`},
		"ComposeUnderExec":   {spec: `, "compose": {"files": ["c.yaml"]}`, wantErr: ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			content := unit(tt.spec)
			if name == "ComposeUnderExec" {
				content = fmt.Appendf(nil, `{"kind": "Service", "metadata": {"name": "web"}, "spec": {"runtime": "exec", "image": %q%s}}`, digest, tt.spec)
				tt.wantErr = `has "spec.compose" under runtime "exec"`
			}
			spec, err := servicespec.Parse("web", content)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Empty(t, spec.Digest(), "a project's digest is its files', unread yet")
		})
	}

	t.Run("ItsDigestIsTheProjectsIdentity", func(t *testing.T) {
		t.Parallel()
		spec, err := servicespec.Parse("web", unit(`, "compose": {"files": ["stacks/web/compose.yaml"], "envFiles": ["stacks/web/.env"], "images": {"web": "r.example/web@`+digest+`"}}`))
		require.NoError(t, err)
		files := map[string]string{"stacks/web/compose.yaml": "services:\n  web:\n    image: r.example/web:v1\n", "stacks/web/.env": "A=1\n"}
		read := func(p string) ([]byte, error) {
			if c, ok := files[p]; ok {
				return []byte(c), nil
			}
			return nil, errors.New("no such file")
		}
		p, err := spec.ReadProject(read)
		require.NoError(t, err)
		require.Equal(t, "stacks/web", p.ProjectDirectory, "the first file's directory")
		require.Equal(t, []servicespec.ComposeFile{{Path: "stacks/web/compose.yaml", Content: files["stacks/web/compose.yaml"]}, {Path: "stacks/web/.env", Content: "A=1\n"}}, p.Files)
		id := spec.Digest()
		require.Equal(t, p.Identity(), id)
		require.True(t, strings.HasPrefix(id, "sha256:"))

		// A file's content, or a pin, changes the identity.
		files["stacks/web/.env"] = "A=2\n"
		_, err = spec.ReadProject(read)
		require.NoError(t, err)
		require.NotEqual(t, id, spec.Digest())

		delete(files, "stacks/web/.env")
		_, err = spec.ReadProject(read)
		require.ErrorContains(t, err, "read stacks/web/.env: no such file")
	})
}

func TestComposeMounts(t *testing.T) {
	t.Parallel()

	p := &servicespec.ComposeProject{
		ComposeFiles: []string{"a.yml", "b.yml"},
		Files: []servicespec.ComposeFile{
			{Path: "a.yml", Content: "services:\n  web:\n    image: x\n    volumes:\n      - data:/data\n      - ./conf:/etc/conf:ro\n  cache:\n    image: y\n    volumes:\n      - type: tmpfs\n        target: /tmp\n"},
			{Path: "b.yml", Content: "services:\n  db:\n    image: z\n    volumes:\n      - type: volume\n        source: pg\n        target: /var/lib/pg\n"},
		},
	}
	mounts, err := p.Mounts()
	require.NoError(t, err)
	require.Equal(t, []string{"web: data:/data", "web: ./conf:/etc/conf:ro", "db: pg:/var/lib/pg"}, mounts, "a tmpfs keeps nothing")

	none := &servicespec.ComposeProject{ComposeFiles: []string{"a.yml"}, Files: []servicespec.ComposeFile{{Path: "a.yml", Content: "services:\n  web:\n    image: x\n"}}}
	mounts, err = none.Mounts()
	require.NoError(t, err)
	require.Empty(t, mounts)

	bad := &servicespec.ComposeProject{ComposeFiles: []string{"a.yml"}, Files: []servicespec.ComposeFile{{Path: "a.yml", Content: "services: [\n"}}}
	_, err = bad.Mounts()
	require.ErrorContains(t, err, "Compose file a.yml does not read as YAML")
}

func TestComposeServicesAndWithPin(t *testing.T) {
	t.Parallel()

	p := &servicespec.ComposeProject{
		ComposeFiles: []string{"a.yml", "b.yml"},
		EnvFiles:     []string{".env"},
		Files: []servicespec.ComposeFile{
			{Path: "a.yml", Content: "services:\n  web:\n    image: x\n  worker:\n    image: x\n"},
			{Path: "b.yml", Content: "services:\n  web:\n    ports: [\"8080:80\"]\n  db:\n    image: z\n"},
			{Path: ".env", Content: "services: not a Compose file\n"},
		},
		Images: map[string]string{"web": "r.example/x@sha256:" + strings.Repeat("1", 64)},
	}
	svcs, err := p.Services()
	require.NoError(t, err)
	require.Equal(t, []string{"db", "web", "worker"}, svcs, "every Compose file's, once each; an env file is none")

	v2 := "r.example/x@sha256:" + strings.Repeat("2", 64)
	moved := p.WithPin("web", v2)
	require.Equal(t, v2, moved.Images["web"])
	require.Equal(t, "r.example/x@sha256:"+strings.Repeat("1", 64), p.Images["web"], "the project itself keeps its pin")
	require.NotEqual(t, p.Identity(), moved.Identity(), "another pin is another identity")
	require.Equal(t, p.Identity(), moved.WithPin("web", p.Images["web"]).Identity(), "the pin alone makes the difference")
	unpinned := &servicespec.ComposeProject{ComposeFiles: []string{"a.yml"}, Files: p.Files[:1]}
	require.Equal(t, map[string]string{"worker": v2}, unpinned.WithPin("worker", v2).Images)
	require.Nil(t, unpinned.Images)

	bad := &servicespec.ComposeProject{ComposeFiles: []string{"a.yml"}, Files: []servicespec.ComposeFile{{Path: "a.yml", Content: "services: [\n"}}}
	_, err = bad.Services()
	require.ErrorContains(t, err, "Compose file a.yml does not read as YAML")
}
