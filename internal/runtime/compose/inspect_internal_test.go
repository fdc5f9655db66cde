package compose

import (
	"net/netip"
	"testing"

	ctr "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/stretchr/testify/require"
)

func TestPortDrift(t *testing.T) {
	t.Parallel()

	published := func(bs map[string][]network.PortBinding) *ctr.InspectResponse {
		pm := network.PortMap{}
		for p, b := range bs {
			pm[network.MustParsePort(p)] = b
		}
		return &ctr.InspectResponse{HostConfig: &ctr.HostConfig{PortBindings: pm}}
	}
	loop := netip.MustParseAddr("127.0.0.1")
	for name, tc := range map[string]struct {
		files  []Port
		engine map[string][]network.PortBinding
		differ bool
		have   []string
	}{
		"TheSamePort": {
			[]Port{{HostIP: "127.0.0.1", Published: "8080", Target: "80", Protocol: "tcp"}},
			map[string][]network.PortBinding{"80/tcp": {{HostIP: loop, HostPort: "8080"}}}, false,
			[]string{"127.0.0.1:8080->80/tcp"},
		},
		"EveryAddressAsTheEngineSaysIt": {
			[]Port{{Published: "9090", Target: "9090", Protocol: "udp"}},
			map[string][]network.PortBinding{"9090/udp": {{HostIP: netip.MustParseAddr("0.0.0.0"), HostPort: "9090"}}}, false,
			[]string{"0.0.0.0:9090->9090/udp"},
		},
		"AHostPortTheEngineChose": {
			[]Port{{Target: "3000", Protocol: "tcp"}},
			map[string][]network.PortBinding{"3000/tcp": {{HostPort: "49153"}}}, false,
			[]string{"0.0.0.0:49153->3000/tcp"},
		},
		"AnotherHostPort": {
			[]Port{{HostIP: "127.0.0.1", Published: "8080", Target: "80", Protocol: "tcp"}},
			map[string][]network.PortBinding{"80/tcp": {{HostIP: loop, HostPort: "8081"}}}, true,
			[]string{"127.0.0.1:8081->80/tcp"},
		},
		"AnotherAddress": {
			[]Port{{HostIP: "127.0.0.1", Published: "8080", Target: "80", Protocol: "tcp"}},
			map[string][]network.PortBinding{"80/tcp": {{HostPort: "8080"}}}, true,
			[]string{"0.0.0.0:8080->80/tcp"},
		},
		"AnExtraPort": {
			nil, map[string][]network.PortBinding{"80/tcp": {{HostPort: "8080"}}}, true,
			[]string{"0.0.0.0:8080->80/tcp"},
		},
		"AMissingPort": {
			[]Port{{Published: "8080", Target: "80", Protocol: "tcp"}}, nil, true, nil,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, have, differ := portDrift(tc.files, published(tc.engine))
			require.Equal(t, tc.differ, differ)
			require.Equal(t, tc.have, have)
		})
	}
}
