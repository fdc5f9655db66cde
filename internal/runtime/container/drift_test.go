package container_test

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	ctr "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"sluice/internal/enginetest"
	"sluice/internal/hoststep"
	"sluice/internal/phase"
)

// TestDriftByHand recreates a service's container by hand, through the
// engine, with every one of sluice's labels but another environment,
// another published host port and a volume mounted read-only: the labels say
// it is the unit's, and Inspect finds each difference all the same.
func TestDriftByHand(t *testing.T) {
	t.Parallel()

	b := setup(t)
	v1 := b.engine.PushHello(t, enginetest.ImageOpts{Version: "v1"})
	volume := "drift-" + b.name
	t.Cleanup(func() { _, _ = b.engine.Command("podman", "volume", "rm", "--force", volume).CombinedOutput() })
	hostDir := filepath.Join(b.dir, "srv", "web")
	require.NoError(t, os.MkdirAll(hostDir, 0o755))
	b.rt.VolumePrefixes = []string{filepath.Join(b.dir, "srv")}
	req := b.request(v1)
	req.Manifest.Env = map[string]string{"HELLO_HASH_ENV": "TOKEN", "MODE": "blue"}
	// Every address, and udp, as the engine reports them back.
	udp := strconv.Itoa(b.port + 2000)
	req.Container.Ports = append(req.Container.Ports, hoststep.ContainerPort{HostIP: "0.0.0.0", HostPort: b.port + 2000, ContainerPort: 9090, Protocol: "udp"})
	req.Container.Volumes = []hoststep.ContainerVolume{{Source: volume, Target: "/data"}, {Source: hostDir, Target: "/host", ReadOnly: true}}
	a, err := b.host.Apply(t.Context(), &events{}, &phase.Phases{}, req)
	require.NoError(t, err)
	require.True(t, a.Probe.OK, a.Probe.Sentence)

	// The container sluice created is its unit's: no drift.
	in, err := b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name})
	require.NoError(t, err)
	require.True(t, in.Running, in.NotRunning)
	require.Empty(t, in.Drift)

	cli, err := client.New(client.WithHost(b.engine.Host))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	res, err := cli.ContainerInspect(t.Context(), b.name, client.ContainerInspectOptions{})
	require.NoError(t, err)
	old := res.Container
	_, err = cli.ContainerRemove(t.Context(), old.ID, client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)

	// By hand: the same name, image, arguments and labels; MODE and the
	// secret's variable changed, the port published on another host port,
	// the volume read-only.
	port, udpPort := network.MustParsePort("8080/tcp"), network.MustParsePort("9090/udp")
	otherPort := strconv.Itoa(b.port + 1000)
	created, err := cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Name: b.name,
		Config: &ctr.Config{
			Image: v1.Ref, Cmd: []string{"--listen", "0.0.0.0:8080"}, Labels: old.Config.Labels,
			Env:          []string{"HELLO_HASH_ENV=TOKEN", "MODE=green", "TOKEN=typed-by-hand"},
			ExposedPorts: network.PortSet{port: {}, udpPort: {}},
		},
		HostConfig: &ctr.HostConfig{
			PortBindings: network.PortMap{
				port:    {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: otherPort}},
				udpPort: {{HostIP: netip.MustParseAddr("0.0.0.0"), HostPort: udp}},
			},
			Mounts: []mount.Mount{
				{Type: mount.TypeVolume, Source: volume, Target: "/data", ReadOnly: true},
				{Type: mount.TypeBind, Source: hostDir, Target: "/host", ReadOnly: true},
			},
		},
	})
	require.NoError(t, err)
	_, err = cli.ContainerStart(t.Context(), created.ID, client.ContainerStartOptions{})
	require.NoError(t, err)

	in, err = b.rt.Inspect(t.Context(), hoststep.InspectRequest{Name: b.name})
	require.NoError(t, err)
	require.True(t, in.Running, in.NotRunning)
	report, err := json.MarshalIndent(in.Drift, "", "  ")
	require.NoError(t, err)
	t.Logf("drift: %s", report)
	require.Len(t, in.Drift, 3, "%s", report)
	require.Equal(t, hoststep.Finding{
		Fact:  "Variable MODE of container " + b.name + " is not the value its unit sets.",
		Proof: `the engine reports MODE="green"; the unit sets MODE="blue"`,
	}, in.Drift[0])
	require.Equal(t, hoststep.Finding{
		Fact:  "Container " + b.name + " publishes its port 8080/tcp otherwise than its unit says.",
		Proof: "the engine reports 8080/tcp published on 127.0.0.1:" + otherPort + "; the unit publishes it on 127.0.0.1:" + strconv.Itoa(b.port),
	}, in.Drift[1])
	require.Equal(t, hoststep.Finding{
		Fact:  "Container " + b.name + " mounts /data otherwise than its unit says.",
		Proof: "the engine reports volume " + volume + " at /data, read-only; the unit mounts volume " + volume + " at /data, read-write",
	}, in.Drift[2])
	// The secret's variable changed too, and is not compared: its value is
	// not at hand, and none is ever written into a finding.
	for _, secret := range []string{"s3cr3t-value", "typed-by-hand"} {
		require.NotContains(t, string(report), secret)
	}
	require.NotContains(t, string(report), `TOKEN"`)
	require.False(t, in.Drift[0].Foreign)
}
