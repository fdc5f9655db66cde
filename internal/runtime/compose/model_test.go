package compose

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"sluice/internal/errs"
)

func TestLoadModelRefuses(t *testing.T) {
	t.Parallel()

	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"NotYAML": {map[string]string{"a.yml": "services: [\n"}, "Compose file a.yml is not valid YAML"},
		"ServicesNotAMapping": {map[string]string{"a.yml": "services: [web]\n"},
			"The services of Compose file a.yml are not a mapping"},
		"ALocalInclude": {map[string]string{"a.yml": "include:\n  - other/compose.yml\nservices: {}\n"},
			"Compose file a.yml includes other files (include:)"},
		"ARemoteInclude": {map[string]string{"a.yml": "include:\n  - oci://example.com/project:1\n"},
			"refuses, local or remote"},
		"Profiles": {map[string]string{"a.yml": "services:\n  web:\n    image: nginx\n    profiles: [debug]\n"},
			"Compose service web in a.yml has profiles"},
		"AnInterpolatedImage": {map[string]string{"a.yml": "services:\n  web:\n    image: nginx:${TAG}\n"},
			"The image of Compose service web in a.yml is built from interpolation (nginx:${TAG})"},
		"AnEscapedDollarInAnImage": {map[string]string{"a.yml": "services:\n  web:\n    image: nginx$$x\n"},
			"built from interpolation"},
		"AnInterpolatedImageInALaterFile": {map[string]string{
			"a.yml": "services:\n  web:\n    image: nginx\n",
			"b.yml": "services:\n  web:\n    image: $IMAGE\n",
		}, "Compose service web in b.yml"},
		"ExtendsOfAnotherFile": {map[string]string{"a.yml": "services:\n  web:\n    extends:\n      file: common.yml\n      service: base\n"},
			"Compose service web in a.yml extends a service of file common.yml"},
		"AFileNotListed": {map[string]string{}, "Compose file a.yml is not among the project's files"},
		"ARelativeBindMount": {map[string]string{"a.yml": "services:\n  db:\n    image: postgres\n    volumes: [\"./data:/var/lib/postgresql/data\"]\n"},
			"Compose service db in a.yml bind-mounts ./data, a path relative to the project"},
		"ARelativeBindMountInLongSyntax": {map[string]string{"a.yml": "services:\n  db:\n    image: postgres\n    volumes:\n      - type: bind\n        source: ../shared\n        target: /shared\n"},
			"bind-mounts ../shared"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			order := []string{"a.yml"}
			if _, ok := tc.files["b.yml"]; ok {
				order = append(order, "b.yml")
			}
			_, err := LoadModel(tc.files, order)
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestLoadModelReads(t *testing.T) {
	t.Parallel()

	files := map[string]string{
		"compose.yml": `version: "3.8"
x-common: &common
  restart: "no"
services:
  web:
    <<: *common
    image: registry.example/web:1.2
    ports:
      - "127.0.0.1:8080:80"
      - 9090:9090/udp
      - "3000"
      - ${PORT}:80
    networks: [front, back]
  worker:
    build: ./worker
    extends: base
    network_mode: none
  base:
    image: busybox
    ports:
      - target: 80
        published: 8081
        host_ip: 127.0.0.1
networks:
  front: {}
  back:
    name: shared-back
  outside:
    external: true
`,
		"override.yml": `services:
  web:
    image: registry.example/web:1.3
    ports: ["127.0.0.1:8080:80", "[::1]:8443:443"]
`,
	}
	m, err := LoadModel(files, []string{"compose.yml", "override.yml"})
	require.NoError(t, err)
	require.Equal(t, "3.8", m.Version)
	require.Equal(t, []string{"base", "web", "worker"}, m.ServiceNames())

	web := m.Service("web")
	require.Equal(t, "registry.example/web:1.3", web.Image, "the last file's image")
	require.False(t, web.Build)
	require.True(t, web.PortsUnknown, "an interpolated port is not compared")
	var ports []string
	for _, p := range web.Ports {
		ports = append(ports, p.String())
	}
	require.Equal(t, []string{"127.0.0.1:8080->80/tcp", "0.0.0.0:9090->9090/udp", "0.0.0.0:->3000/tcp", "::1:8443->443/tcp"}, ports)
	require.Equal(t, []string{"front", "back"}, web.Networks)

	worker := m.Service("worker")
	require.True(t, worker.Build)
	require.Equal(t, "none", worker.NetworkMode)
	require.Equal(t, []Port{{HostIP: "127.0.0.1", Published: "8081", Target: "80", Protocol: "tcp"}}, m.Service("base").Ports)
	require.Nil(t, m.Service("nope"))

	require.Equal(t, "sluice-web_front", m.NetworkName("sluice-web", "front"))
	require.Equal(t, "shared-back", m.NetworkName("sluice-web", "back"))
	require.Equal(t, "outside", m.NetworkName("sluice-web", "outside"))
	require.Equal(t, "sluice-web_default", m.NetworkName("sluice-web", "default"))
}

func TestOverride(t *testing.T) {
	t.Parallel()

	m, err := LoadModel(map[string]string{"c.yml": "version: '3.8'\nservices:\n  web: {image: 'web:1'}\n  db: {image: 'postgres:16'}\n"}, []string{"c.yml"})
	require.NoError(t, err)
	pin := "registry.example/web@sha256:" + strings.Repeat("a", 64)
	text := m.Override("shop", "sha256:"+strings.Repeat("b", 64), map[string]string{"web": pin})
	require.Equal(t, text, m.Override("shop", "sha256:"+strings.Repeat("b", 64), map[string]string{"web": pin}), "deterministic")
	require.Contains(t, text, "Generated by sluice")

	var doc struct {
		Version  string `yaml:"version"`
		Services map[string]struct {
			Image  string            `yaml:"image"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(text), &doc))
	require.Equal(t, "3.8", doc.Version, "the first file's version: Compose v1 refuses a mismatch")
	require.Equal(t, pin, doc.Services["web"].Image)
	require.Empty(t, doc.Services["db"].Image, "an unpinned service keeps its files' image")
	require.Equal(t, map[string]string{
		LabelService: "shop", LabelDigest: "sha256:" + strings.Repeat("b", 64), LabelComposeService: "db",
	}, doc.Services["db"].Labels)
}

func TestLoadModelKeepsMountsThatOutliveAVersion(t *testing.T) {
	t.Parallel()

	_, err := LoadModel(map[string]string{"a.yml": `services:
  db:
    image: postgres
    volumes:
      - data:/var/lib/postgresql/data
      - /srv/backups:/backups:ro
      - ~/cache:/cache
      - type: volume
        source: data
        target: /more
      - type: tmpfs
        target: /tmp
      - /anonymous
volumes:
  data: {}
`}, []string{"a.yml"})
	require.NoError(t, err)
}
