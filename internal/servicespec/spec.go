// Package servicespec reads the spec of a Service unit: what to run (an
// artifact pinned by digest, its arguments and environment) and how to tell
// that it came up (an HTTP probe). Sync uses it to refuse a malformed service
// before it reaches the inventory; the service actions use it to render the
// unit the runtime starts.
package servicespec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sluice/internal/artifact"
	"sluice/internal/imageref"
	"sluice/internal/render"
)

// Kind is the unit kind this package reads.
const Kind = "Service"

// The runtimes a service runs under (spec.runtime).
const (
	// RuntimeExec is a process under sluice's own supervisor on the node.
	RuntimeExec = "exec"
	// RuntimeSystemd is a systemd service on the node, sluice-<name>.service.
	RuntimeSystemd = "systemd"
)

// Runtimes lists the valid values of spec.runtime.
var Runtimes = []string{RuntimeExec, RuntimeSystemd, RuntimeContainer, RuntimeCompose}

// Default and largest probe timeouts, in seconds.
const (
	DefaultProbeTimeoutSec = 30
	MaxProbeTimeoutSec     = 3600
)

// Health rollout policies: what an action does when the started process
// fails its probe (spec.onProbeFailure).
const (
	// OnProbeFailureRollback restores the unit that ran before (a deploy
	// also reverts its pin). The default of deploy and rollback.
	OnProbeFailureRollback = "rollback"
	// OnProbeFailureStop stops the process: nothing runs. The default of
	// converge.
	OnProbeFailureStop = "stop"
	// OnProbeFailureRetryOnce probes once more (restarting the process if it
	// exited); if that fails too, the action's default applies.
	OnProbeFailureRetryOnce = "retry-once"
	// OnProbeFailurePause leaves everything as it is and holds the
	// service's queue until an operator resumes it.
	OnProbeFailurePause = "pause"
	// OnProbeFailureObserve only reports: the run succeeds with the probe's
	// failure in its result, and the unhealthy process keeps running.
	OnProbeFailureObserve = "observe"
)

// OnProbeFailurePolicies lists the valid values of spec.onProbeFailure.
var OnProbeFailurePolicies = []string{
	OnProbeFailureRollback, OnProbeFailureStop, OnProbeFailureRetryOnce, OnProbeFailurePause, OnProbeFailureObserve,
}

// Spec is a Service unit's spec.
type Spec struct {
	Runtime string `json:"runtime"`
	// Image is the pin as written: "sha256:<hex>" or "name@sha256:<hex>";
	// a container's may be "registry/repo:tag", which a sync resolves.
	Image string `json:"image"`
	// Resolved is what a container's image named in its registry when the
	// unit's content was accepted (Resolve); nil until then, and for every
	// other runtime.
	Resolved *imageref.Resolution `json:"-"`
	Args     []string             `json:"args,omitempty"`
	// Env is the process environment: each value a string, or a secret
	// reference (see EnvValue).
	Env            map[string]EnvValue `json:"env,omitempty"`
	WorkDir        string              `json:"workDir,omitempty"`
	Probe          *Probe              `json:"probe,omitempty"`
	StopTimeoutSec int                 `json:"stopTimeoutSec,omitempty"`
	// OnProbeFailure is the health rollout policy, one of
	// OnProbeFailurePolicies; "" leaves it to the action's default.
	OnProbeFailure string `json:"onProbeFailure,omitempty"`
	// DriftMode is what a drift check may do about the drift it finds,
	// one of DriftModes; "" is DriftModeObserve.
	DriftMode string `json:"driftMode,omitempty"`
	// Node names the node the service runs on; "" leaves it to the control
	// plane's default node (SLUICE_DEFAULT_NODE, else serve's own).
	Node string `json:"node,omitempty"`
	// Systemd is what a systemd service adds to its unit; runtime systemd
	// only.
	Systemd *Systemd `json:"systemd,omitempty"`
	// Container is what a container service adds; runtime container only.
	Container *Container `json:"container,omitempty"`
	// Compose is what a compose service adds; runtime compose only.
	Compose *Compose `json:"compose,omitempty"`

	// project is the compose project read from the commit in force.
	project *ComposeProject
}

// The drift modes of spec.driftMode.
const (
	// DriftModeObserve reports drift only. The default.
	DriftModeObserve = "observe"
	// DriftModeSuggest reports drift with the action that repairs it.
	DriftModeSuggest = "suggest"
	// DriftModeEnforce converges back to the accepted manifest and digest
	// when runtime or artifact drift persists over two checks, where that
	// target is proven.
	DriftModeEnforce = "enforce"
)

// DriftModes lists the valid values of spec.driftMode.
var DriftModes = []string{DriftModeObserve, DriftModeSuggest, DriftModeEnforce}

// Mode returns the drift mode in force: the spec's, else observe.
func (s *Spec) Mode() string {
	if s.DriftMode == "" {
		return DriftModeObserve
	}
	return s.DriftMode
}

// Probe says how to tell that a started process is healthy.
type Probe struct {
	// HTTP is the URL that must answer 2xx.
	HTTP       string `json:"http"`
	TimeoutSec int    `json:"timeoutSec,omitempty"`
}

// Digest returns the pinned artifact digest, "sha256:<hex>": for an image
// named by tag, the digest its sync resolved, "" before that.
func (s *Spec) Digest() string {
	if s.Resolved != nil {
		return s.Resolved.Digest
	}
	if s.Runtime == RuntimeCompose {
		// A project's identity, once its files are read; "" before.
		if s.project != nil {
			return s.project.Identity()
		}
		return ""
	}
	d, _ := artifact.ParseDigest(s.Image) // Parse checked it, or it is a tag
	return d
}

// ProbeTimeoutSec is the probe's effective timeout.
func (s *Spec) ProbeTimeoutSec() int {
	if s.Probe == nil || s.Probe.TimeoutSec == 0 {
		return DefaultProbeTimeoutSec
	}
	return s.Probe.TimeoutSec
}

// Manifest is what render needs to write the unit of service name.
func (s *Spec) Manifest(name string) render.Manifest {
	return render.Manifest{
		Service: name, ArtifactDigest: s.Digest(), Args: s.Args, Env: s.PlainEnv(),
		WorkDir: s.WorkDir, StopTimeoutSec: s.StopTimeoutSec,
	}
}

// Parse reads the spec of a Service unit from its content (the whole unit,
// canonical or as written), and checks it. The error is one sentence that
// completes "<path>: ", as the sync's list of invalid units reads.
func Parse(name string, content []byte) (*Spec, error) {
	var doc struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(content, &doc); err != nil {
		return nil, fmt.Errorf("is not a JSON object: %v", err)
	}
	if len(doc.Spec) == 0 || string(doc.Spec) == "null" {
		return nil, fmt.Errorf(`has no "spec"; a service needs at least {"runtime": "exec", "image": "sha256:…"}`)
	}
	dec := json.NewDecoder(bytes.NewReader(doc.Spec))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("has a spec that does not read as a service: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := s.check(name); err != nil {
		return nil, err
	}
	return &s, nil
}

// nodeNameRE is a node's name, as package node checks it.
var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (s *Spec) check(name string) error {
	switch s.Runtime {
	case RuntimeExec:
		if s.Systemd != nil {
			return fmt.Errorf(`has "spec.systemd" under runtime "exec"; it is read by runtime "systemd" only`)
		}
	case RuntimeSystemd:
		if err := s.Systemd.check(); err != nil {
			return err
		}
	case RuntimeContainer:
		if s.Systemd != nil {
			return fmt.Errorf(`has "spec.systemd" under runtime "container"; it is read by runtime "systemd" only`)
		}
		if s.WorkDir != "" {
			return fmt.Errorf(`has "spec.workDir" under runtime "container"; the image sets its working directory`)
		}
	}
	if s.Container != nil && s.Runtime != RuntimeContainer && s.Runtime != RuntimeCompose && s.Runtime != "" && slices.Contains(Runtimes, s.Runtime) {
		return fmt.Errorf(`has "spec.container" under runtime %q; it is read by runtime "container" only`, s.Runtime)
	}
	if s.Compose != nil && s.Runtime != RuntimeCompose && s.Runtime != "" && slices.Contains(Runtimes, s.Runtime) {
		return fmt.Errorf(`has "spec.compose" under runtime %q; it is read by runtime "compose" only`, s.Runtime)
	}
	switch s.Runtime {
	case RuntimeCompose:
		if err := s.checkCompose(); err != nil {
			return err
		}
		return s.checkCommon(name)
	case RuntimeExec, RuntimeSystemd, RuntimeContainer:
	case "":
		return fmt.Errorf(`has no "spec.runtime"; set it to one of %s`, strings.Join(Runtimes, ", "))
	default:
		return fmt.Errorf(`has "spec.runtime" %q; give one of %s`, s.Runtime, strings.Join(Runtimes, ", "))
	}
	if s.Image == "" {
		return fmt.Errorf(`has no "spec.image"; pin the artifact as "sha256:<64 hex>" (see sluice artifact push)`)
	}
	if _, err := artifact.ParseDigest(s.Image); err != nil {
		if err := s.checkTag(); err != nil {
			return err
		}
	}
	if s.Runtime == RuntimeContainer {
		if err := s.checkContainer(); err != nil {
			return err
		}
	}
	return s.checkCommon(name)
}

// checkCommon checks what every runtime's spec has: the working directory,
// the probe, the policies, the node, and what the renderer refuses.
func (s *Spec) checkCommon(name string) error {
	if s.WorkDir != "" && !filepath.IsAbs(s.WorkDir) {
		return fmt.Errorf(`has "spec.workDir" %q that is not an absolute path`, s.WorkDir)
	}
	if p := s.Probe; p != nil {
		u, err := url.Parse(p.HTTP)
		if p.HTTP == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf(`has "spec.probe.http" %q; give an http:// or https:// URL such as http://127.0.0.1:8080/healthz`, p.HTTP)
		}
		if p.TimeoutSec < 0 || p.TimeoutSec > MaxProbeTimeoutSec {
			return fmt.Errorf(`has "spec.probe.timeoutSec" %d; give 1 to %d, or leave it out for %d`, p.TimeoutSec, MaxProbeTimeoutSec, DefaultProbeTimeoutSec)
		}
	}
	if s.OnProbeFailure != "" && !slices.Contains(OnProbeFailurePolicies, s.OnProbeFailure) {
		return fmt.Errorf(`has "spec.onProbeFailure" %q; give one of %s, or leave it out for the action's default (rollback for deploy, stop for converge)`,
			s.OnProbeFailure, strings.Join(OnProbeFailurePolicies, ", "))
	}
	if s.DriftMode != "" && !slices.Contains(DriftModes, s.DriftMode) {
		return fmt.Errorf(`has "spec.driftMode" %q; give one of %s, or leave it out for observe`,
			s.DriftMode, strings.Join(DriftModes, ", "))
	}
	if s.Node != "" && !nodeNameRE.MatchString(s.Node) {
		return fmt.Errorf(`has "spec.node" %q that is not a node name (lowercase letters, digits and "-", at most 63)`, s.Node)
	}
	// The rest (name, environment names, NUL bytes, stop timeout) is what
	// the renderer refuses; ask it, so the two never disagree.
	// Secret references render with the version an action resolves;
	// version 1 stands for it here, and a zero blob for a SOPS file's.
	m := s.Manifest(name)
	if m.ArtifactDigest == "" {
		// A tag, which its sync resolves, or a Compose project, whose
		// files an action reads: any digest stands for it here.
		m.ArtifactDigest = "sha256:" + strings.Repeat("0", 64)
	}
	for k, ref := range s.SecretEnv() {
		if m.Secrets == nil {
			m.Secrets = map[string]render.SecretRef{}
		}
		m.Secrets[k] = render.SecretRef{Name: ref, Version: 1}
	}
	for k, ref := range s.SOPSEnv() {
		if m.Secrets == nil {
			m.Secrets = map[string]render.SecretRef{}
		}
		m.Secrets[k] = render.SecretRef{File: ref.File, Key: ref.Key, Blob: strings.Repeat("0", 40)}
	}
	if _, _, err := render.Render(m); err != nil {
		return fmt.Errorf("is refused: %s", strings.TrimSuffix(err.Error(), "."))
	}
	return nil
}
