package servicespec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/imageref"
	"sluice/internal/servicespec"
)

func TestParseContainer(t *testing.T) {
	t.Parallel()

	digest := "sha256:" + strings.Repeat("ab", 32)
	unit := func(runtime, image, extra string) []byte {
		return fmt.Appendf(nil, `{"kind": "Service", "metadata": {"name": "web"},
			"spec": {"runtime": %q, "image": %q%s}}`, runtime, image, extra)
	}
	for name, tt := range map[string]struct {
		runtime, image, extra string
		wantErr               string
	}{
		"ByRepositoryAndDigest": {image: "registry.example:5000/team/web@" + digest},
		"WithItsOptions": {image: "r.example/web@" + digest, extra: `, "container": {"ports": [{"hostPort": 8080}],
			"restart": "on-failure", "network": "none", "pullSecret": "registry", "healthcheck": {"command": ["/hello", "--check", "http://127.0.0.1:8080/healthz"]}}`},
		"ADigestWithoutARepository": {image: digest, wantErr: `without a repository; a container image is pinned as "registry/repo@sha256:<64 hex>"`},
		"ATag":                      {image: "r.example/web:latest"},
		"ATagOfAnArchive":           {image: "r.example/web:v1", extra: `, "container": {"archive": true}`, wantErr: `is not a digest pin`},
		"ATagUnderExec":             {runtime: "exec", image: "r.example/web:v1", wantErr: `is not a digest pin`},
		"ATagThatIsNoReference":     {image: "r.example/Web:v1", wantErr: `is neither an image by digest (registry/repo@sha256:<64 hex>) nor by tag`},
		"Privileged":                {image: "r.example/web@" + digest, extra: `, "container": {"privileged": true}`},
		"AddedCapabilities":         {image: "r.example/web@" + digest, extra: `, "container": {"capAdd": ["NET_ADMIN"]}`},
		"Devices":                   {image: "r.example/web@" + digest, extra: `, "container": {"devices": ["/dev/kvm"]}`},
		"TheHostsPIDs":              {image: "r.example/web@" + digest, extra: `, "container": {"pid": "host"}`},
		"AnotherContainersPIDs":     {image: "r.example/web@" + digest, extra: `, "container": {"pid": "container:db"}`, wantErr: "sharing another container's PID namespace is refused"},
		"TheHostsNetwork":           {image: "r.example/web@" + digest, extra: `, "container": {"network": "host"}`},
		"AnotherNetwork":            {image: "r.example/web@" + digest, extra: `, "container": {"network": "mynet"}`, wantErr: `"spec.container.network" "mynet"; give none`},
		"ABadRestart":               {image: "r.example/web@" + digest, extra: `, "container": {"restart": "sometimes"}`, wantErr: `"spec.container.restart" "sometimes"`},
		"ABadPort":                  {image: "r.example/web@" + digest, extra: `, "container": {"ports": [{"hostPort": 70000}]}`, wantErr: "give hostPort (and containerPort) from 1 to 65535"},
		"ABadPullSecret":            {image: "r.example/web@" + digest, extra: `, "container": {"pullSecret": "no spaces"}`, wantErr: "is not a secret name"},
		"AWorkDir":                  {image: "r.example/web@" + digest, extra: `, "workDir": "/srv"`, wantErr: "the image sets its working directory"},
		"AnArchiveByItsDigestAlone": {image: digest, extra: `, "container": {"archive": true}`},
		"AnArchiveWithAPullSecret":  {image: digest, extra: `, "container": {"archive": true, "pullSecret": "registry"}`, wantErr: "an archive comes from sluice's store and is never pulled"},
		"Limits":                    {image: "r.example/web@" + digest, extra: `, "container": {"memory": "512M", "cpus": 0.5}`},
		"MemoryAsAnInteger":         {image: "r.example/web@" + digest, extra: `, "container": {"memory": 67108864}`},
		"MemoryWithAUnitOfItsOwn":   {image: "r.example/web@" + digest, extra: `, "container": {"memory": "512MB"}`, wantErr: `"spec.container.memory" "512MB", and it is not a whole number of bytes`},
		"MemoryAsADecimal":          {image: "r.example/web@" + digest, extra: `, "container": {"memory": "1.5G"}`, wantErr: `"spec.container.memory" "1.5G", and it is not a whole number`},
		"NegativeMemory":            {image: "r.example/web@" + digest, extra: `, "container": {"memory": -1}`, wantErr: `"spec.container.memory" "-1", and it is not a whole number`},
		"MemoryUnderTheFloor":       {image: "r.example/web@" + digest, extra: `, "container": {"memory": "4M"}`, wantErr: `under the engine's floor of 6M`},
		"MemoryTooLarge":            {image: "r.example/web@" + digest, extra: `, "container": {"memory": "9999999999999G"}`, wantErr: `"9999999999999G", and it is too large`},
		"TooFewCPUs":                {image: "r.example/web@" + digest, extra: `, "container": {"cpus": 0.001}`, wantErr: `"spec.container.cpus" 0.001; give a number of CPUs from 0.01`},
		"NegativeCPUs":              {image: "r.example/web@" + digest, extra: `, "container": {"cpus": -1}`, wantErr: `"spec.container.cpus" -1`},
		"CPUsTooFine":               {image: "r.example/web@" + digest, extra: `, "container": {"cpus": 0.12345}`, wantErr: `at most three decimal places`},
		"Volumes": {image: "r.example/web@" + digest, extra: `, "container": {"volumes": [{"source": "/srv/web/data", "target": "/data"},
			{"source": "web-cache", "target": "/cache", "readOnly": true}]}`},
		"ARelativeVolume":        {image: "r.example/web@" + digest, extra: `, "container": {"volumes": [{"source": "./data", "target": "/data"}]}`, wantErr: `whose source "./data" is neither an absolute host path nor a volume's name`},
		"AnUncleanVolume":        {image: "r.example/web@" + digest, extra: `, "container": {"volumes": [{"source": "/srv/web/../../etc", "target": "/data"}]}`, wantErr: `whose source "/srv/web/../../etc" is not a clean path; write it as "/etc"`},
		"AVolumeWithoutATarget":  {image: "r.example/web@" + digest, extra: `, "container": {"volumes": [{"source": "data"}]}`, wantErr: `whose target "" is not an absolute, clean path`},
		"AVolumeAtARelativePath": {image: "r.example/web@" + digest, extra: `, "container": {"volumes": [{"source": "data", "target": "data"}]}`, wantErr: `whose target "data" is not an absolute, clean path`},
		"TwoVolumesAtOneTarget":  {image: "r.example/web@" + digest, extra: `, "container": {"volumes": [{"source": "a1", "target": "/d"}, {"source": "b1", "target": "/d"}]}`, wantErr: `mounts two volumes at /d`},
		"ContainerUnderExec":     {runtime: "exec", image: digest, extra: `, "container": {}`, wantErr: `has "spec.container" under runtime "exec"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runtime := tt.runtime
			if runtime == "" {
				runtime = servicespec.RuntimeContainer
			}
			spec, err := servicespec.Parse("web", unit(runtime, tt.image, tt.extra))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if spec.Tagged() {
				require.Empty(t, spec.Digest(), "a tag has no digest until its sync resolves it")
				require.Empty(t, spec.PulledImage())
				return
			}
			require.Equal(t, digest, spec.Digest())
		})
	}

	t.Run("ATagRunsTheDigestItsSyncResolved", func(t *testing.T) {
		t.Parallel()
		spec, err := servicespec.Parse("web", unit("container", "r.example:5000/team/web:v1", ""))
		require.NoError(t, err)
		require.True(t, spec.Tagged())
		spec.Resolve(&imageref.Resolution{Ref: spec.Image, Repository: "r.example:5000/team/web", Tag: "v1", Digest: digest})
		require.Equal(t, digest, spec.Digest())
		require.Equal(t, "r.example:5000/team/web@"+digest, spec.PulledImage())
		require.Equal(t, "r.example:5000/team/web:v1", spec.Image, "the unit's text is as written")
	})

	t.Run("PowersOverTheHostAreListedAndRefusedUnlessAllowed", func(t *testing.T) {
		t.Parallel()
		spec, err := servicespec.Parse("web", unit("container", "r.example/web@"+digest, `, "container": {"privileged": true,
			"capAdd": ["NET_ADMIN"], "devices": ["/dev/fuse"], "pid": "host", "network": "host"}`))
		require.NoError(t, err)
		var names []string
		for _, p := range spec.Powers() {
			names = append(names, p.Name)
		}
		require.Equal(t, servicespec.HostPowers, names)
		require.EqualError(t, servicespec.PowersRefused(spec.Powers(), nil, "apps"),
			`has "spec.container.privileged": a privileged container holds the whole host, which source apps does not allow (an admin allows it by adding "privileged" to the source's containerPowers)`)
		require.ErrorContains(t, servicespec.PowersRefused(spec.Powers(), []string{"privileged", "cap-add", "devices", "pid-host"}, "apps"),
			`has "spec.container.network" "host": the host's network bypasses its published ports`)
		require.NoError(t, servicespec.PowersRefused(spec.Powers(), servicespec.HostPowers, "apps"))

		plain, err := servicespec.Parse("web", unit("container", "r.example/web@"+digest, ""))
		require.NoError(t, err)
		require.Empty(t, plain.Powers())
		require.NoError(t, servicespec.PowersRefused(plain.Powers(), nil, "apps"))
	})

	t.Run("APullSecretIsOneOfItsSecrets", func(t *testing.T) {
		t.Parallel()
		spec, err := servicespec.Parse("web", unit("container", "r.example/web@"+digest, `, "container": {"pullSecret": "registry"}`))
		require.NoError(t, err)
		require.Equal(t, "registry", spec.PullSecret())
		require.Equal(t, []string{"registry"}, spec.SecretNames(), "sync checks that the secret exists, as for an environment's")
		require.Empty(t, spec.SecretEnv(), "it is no environment variable of the container")
		require.True(t, spec.PulledByEngine(), "sluice's store does not hold it")
	})

	t.Run("LimitsAreReadAsTheEngineTakesThem", func(t *testing.T) {
		t.Parallel()
		spec, err := servicespec.Parse("web", unit("container", "r.example/web@"+digest, `, "container": {"memory": "512m", "cpus": 1.25}`))
		require.NoError(t, err)
		require.Equal(t, int64(512<<20), spec.Container.MemoryBytes())
		require.Equal(t, int64(1_250_000_000), spec.Container.NanoCPUs())
		spec, err = servicespec.Parse("web", unit("container", "r.example/web@"+digest, `, "container": {"memory": 6291456, "cpus": 0.1}`))
		require.NoError(t, err)
		require.Equal(t, int64(6<<20), spec.Container.MemoryBytes())
		require.Equal(t, int64(100_000_000), spec.Container.NanoCPUs(), "0.1 is not 0.1000000000000000055")
		for in, want := range map[string]int64{"2k": 2 << 10, "3G": 3 << 30, "7": 7} {
			n, err := servicespec.ByteSize(in).Bytes()
			require.NoError(t, err)
			require.Equal(t, want, n, in)
		}
		spec, err = servicespec.Parse("web", unit("container", "r.example/web@"+digest, `, "container": {}`))
		require.NoError(t, err)
		require.Zero(t, spec.Container.MemoryBytes())
		require.Zero(t, spec.Container.NanoCPUs())
	})

	t.Run("AnArchiveIsInSluicesStore", func(t *testing.T) {
		t.Parallel()
		spec, err := servicespec.Parse("web", unit("container", digest, `, "container": {"archive": true}`))
		require.NoError(t, err)
		require.True(t, spec.Archived())
		require.False(t, spec.PulledByEngine(), "acceptance and deploy look for it in the store")
	})
}
