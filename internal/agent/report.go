package agent

import (
	"context"
	"os"
	"runtime"
	"strings"

	"sluice/internal/apiclient"
	"sluice/internal/hoststep"
	"sluice/internal/nodeproto"
)

// report is what the agent says of its host with each join and heartbeat.
func report(cfg *Config, session string) apiclient.NodeReported {
	host, _ := os.Hostname()
	protocol := int64(nodeproto.Protocol)
	if cfg.Protocol != nil {
		protocol = int64(*cfg.Protocol)
	}
	r := apiclient.NodeReported{Hostname: &host, Os: ptr(runtime.GOOS), Arch: ptr(runtime.GOARCH), Protocol: &protocol}
	if cfg.Version != "" {
		r.AgentVersion = ptr(cfg.Version)
	}
	if session != "" {
		r.Session = &session
	}
	return r
}

func ptr[T any](v T) *T { return &v }

// processes is what runs on this host for each service, for the
// heartbeat: the unit on disk, the process, and the bytes it runs.
func processes(ctx context.Context, host *hoststep.Host) []apiclient.NodeProcess {
	snap := host.Snapshot(ctx)
	out := make([]apiclient.NodeProcess, 0, len(snap))
	for _, in := range snap {
		p := apiclient.NodeProcess{Service: in.Name, Running: in.Running}
		if in.Pid > 0 {
			p.Pid = ptr(int64(in.Pid))
		}
		if in.NotRunning != "" {
			p.NotRunning = ptr(truncateText(in.NotRunning, 1000))
		}
		if in.UnitDigest != "" {
			p.UnitDigest = &in.UnitDigest
		}
		if in.UnitHash != "" {
			p.UnitHash = &in.UnitHash
		}
		if f := hoststep.ForeignOf(in); f != "" {
			p.Foreign = ptr(truncateText(f, 1000))
		}
		if a := in.Artifact; a != nil {
			p.Matches = a.Matches
			p.Proof = ptr(truncateText(a.Sentence, 1000))
			if a.Proven {
				p.ExeDigest = &a.Digest
			}
		}
		out = append(out, p)
	}
	return out
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
