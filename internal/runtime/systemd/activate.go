package systemd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"sluice/internal/hoststep"
	"sluice/internal/servicespec"
)

// state is what systemd says of a service unit.
type state struct {
	LoadState, ActiveState, SubState, Result string
	InvocationID                             string
	NeedDaemonReload                         bool
	MainPID                                  int
	ExecMainCode, ExecMainStatus             int
	NRestarts                                int
}

// state reads what systemd says of the unit of service name.
func (r *Runtime) state(ctx context.Context, name string) (*state, error) {
	conn, err := r.bus(ctx)
	if err != nil {
		return nil, err
	}
	unit := UnitName(name)
	u, err := conn.GetUnitPropertiesContext(ctx, unit)
	if err != nil {
		return nil, fmt.Errorf("ask systemd about %s: %w", unit, err)
	}
	s := &state{}
	s.LoadState, _ = u["LoadState"].(string)
	s.ActiveState, _ = u["ActiveState"].(string)
	s.SubState, _ = u["SubState"].(string)
	s.NeedDaemonReload, _ = u["NeedDaemonReload"].(bool)
	if id, ok := u["InvocationID"].([]byte); ok && len(id) > 0 && !bytes.Equal(id, make([]byte, len(id))) {
		s.InvocationID = hex.EncodeToString(id)
	}
	if s.LoadState != "loaded" {
		return s, nil
	}
	svc, err := conn.GetUnitTypePropertiesContext(ctx, unit, "Service")
	if err != nil {
		return nil, fmt.Errorf("ask systemd about %s: %w", unit, err)
	}
	s.Result, _ = svc["Result"].(string)
	s.MainPID = toInt(svc["MainPID"])
	s.ExecMainCode = toInt(svc["ExecMainCode"])
	s.ExecMainStatus = toInt(svc["ExecMainStatus"])
	s.NRestarts = toInt(svc["NRestarts"])
	return s, nil
}

func toInt(v any) int {
	switch n := v.(type) {
	case uint32:
		return int(n)
	case int32:
		return int(n)
	case uint64:
		return int(n)
	case int64:
		return int(n)
	}
	return 0
}

// exit is how the main process of the last start ended, as systemd keeps
// it (ExecMainCode is CLD_EXITED, CLD_KILLED or CLD_DUMPED).
func (s *state) exit() *hoststep.Exit {
	switch s.ExecMainCode {
	case 1:
		return &hoststep.Exit{Code: s.ExecMainStatus}
	case 2, 3:
		return &hoststep.Exit{Code: -1, Signal: signalName(s.ExecMainStatus)}
	}
	if s.Result != "" && s.Result != "success" {
		return &hoststep.Exit{Code: -1, Error: "systemd's result is " + s.Result}
	}
	return nil
}

func signalName(n int) string {
	names := map[int]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}
	if s, ok := names[n]; ok {
		return s
	}
	return "signal " + strconv.Itoa(n)
}

// sentence says how the unit stands: "sluice-web.service is failed
// (failed, result exit-code): exited with code 3".
func (s *state) sentence(name string) string {
	out := fmt.Sprintf("%s is %s (%s", UnitName(name), s.ActiveState, s.SubState)
	if s.Result != "" && s.Result != "success" {
		out += ", result " + s.Result
	}
	out += ")"
	if e := s.exit(); e != nil && s.ActiveState != "active" {
		out += ": " + e.String()
	}
	return out
}

// job waits for a job the manager queued and returns its result ("done",
// "failed", "canceled", "timeout", "dependency", "skipped").
func job(ctx context.Context, start func(ch chan<- string) (int, error)) (string, error) {
	ch := make(chan string, 1)
	if _, err := start(ch); err != nil {
		return "", err
	}
	select {
	case res := <-ch:
		return res, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Activate implements hoststep.Runtime: daemon-reload, enable, restart,
// through systemd's D-Bus API. A start that fails still answers the start
// (its exit is then the probe's verdict, with its journal's last lines),
// unless systemd did not even start it.
//
// The reload and the enable run only when systemd needs them: a unit it
// has not loaded, or whose file changed since (NeedDaemonReload), and a
// unit not enabled yet. A reload re-reads every unit on the host (0.4 to
// 0.7 s in a small container, most of a converge that changes nothing in
// the unit), and systemd's own flag says when the one written is not the
// one it runs.
func (r *Runtime) Activate(ctx context.Context, u *hoststep.Unit, _ string) (hoststep.Instance, error) {
	name := u.Manifest.Service
	unit := UnitName(name)
	conn, err := r.bus(ctx)
	if err != nil {
		return nil, err
	}
	before, err := r.state(ctx, name)
	if err != nil {
		return nil, err
	}
	if before.LoadState != "loaded" || before.NeedDaemonReload {
		if err := conn.ReloadContext(ctx); err != nil {
			return nil, fmt.Errorf("daemon-reload: %w", err)
		}
	}
	if p, err := conn.GetUnitPropertyContext(ctx, unit, "UnitFileState"); err != nil || p.Value.Value() != "enabled" {
		if _, _, err := conn.EnableUnitFilesContext(ctx, []string{unit}, false, true); err != nil {
			return nil, fmt.Errorf("enable %s: %w", unit, err)
		}
	}
	_ = conn.ResetFailedUnitContext(ctx, unit) // a failed unit keeps its old result otherwise
	res, err := job(ctx, func(ch chan<- string) (int, error) { return conn.RestartUnitContext(ctx, unit, "replace", ch) })
	if err != nil {
		return nil, fmt.Errorf("restart %s: %w", unit, err)
	}
	s, err := r.state(ctx, name)
	if err != nil {
		return nil, err
	}
	if s.InvocationID == "" {
		return nil, fmt.Errorf("systemd did not start %s (job %s): %s", unit, res, s.sentence(name))
	}
	return &instance{r: r, name: name, invocation: s.InvocationID, pid: s.MainPID}, nil
}

// Adopt implements hoststep.Runtime: the start systemd runs now.
func (r *Runtime) Adopt(ctx context.Context, name string) (hoststep.Instance, error) {
	s, err := r.state(ctx, name)
	if err != nil {
		return nil, err
	}
	if s.ActiveState != "active" || s.MainPID == 0 {
		return nil, errors.New(s.sentence(name))
	}
	return &instance{r: r, name: name, invocation: s.InvocationID, pid: s.MainPID}, nil
}

// Stop implements hoststep.Runtime: stop, and disable so that a boot does
// not start it either; the unit file stays.
func (r *Runtime) Stop(ctx context.Context, name string) error {
	if whose, err := r.owner(ctx, name); err != nil {
		return err
	} else if whose != "" {
		return conflict(whose, name)
	}
	return r.stop(ctx, name)
}

func (r *Runtime) stop(ctx context.Context, name string) error {
	conn, err := r.bus(ctx)
	if err != nil {
		return err
	}
	unit := UnitName(name)
	if _, err := job(ctx, func(ch chan<- string) (int, error) { return conn.StopUnitContext(ctx, unit, "replace", ch) }); err != nil {
		return fmt.Errorf("stop %s: %w", unit, err)
	}
	if _, err := conn.DisableUnitFilesContext(ctx, []string{unit}, false); err != nil {
		return fmt.Errorf("disable %s: %w", unit, err)
	}
	// As systemctl disable does: the manager reads the links again.
	if err := conn.ReloadContext(ctx); err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	return nil
}

// Remove implements hoststep.Runtime: stop, disable, remove the file,
// daemon-reload. The installed artifact stays (another unit may run it).
func (r *Runtime) Remove(ctx context.Context, name string) error {
	if whose, err := r.owner(ctx, name); err != nil {
		return err
	} else if whose != "" {
		return conflict(whose, name)
	}
	if err := r.stop(ctx, name); err != nil {
		return err
	}
	if err := os.Remove(r.unitFile(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the unit of %s: %w", name, err)
	}
	if err := os.Remove(r.host(r.secretsPath(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the secrets of %s: %w", name, err)
	}
	conn, err := r.bus(ctx)
	if err != nil {
		return err
	}
	if err := conn.ReloadContext(ctx); err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	_ = conn.ResetFailedUnitContext(ctx, UnitName(name))
	return nil
}

// Prove implements hoststep.Runtime: systemd's own account of the start,
// and the digest of the bytes its main process runs, read through /proc.
func (r *Runtime) Prove(ctx context.Context, inst hoststep.Instance, want string) *hoststep.ArtifactProof {
	in, ok := inst.(*instance)
	if !ok {
		return &hoststep.ArtifactProof{Pid: inst.Pid(), Want: want, Sentence: "Which artifact runs cannot be proven: the start is not the systemd runtime's."}
	}
	s, err := r.state(ctx, in.name)
	if err != nil {
		return &hoststep.ArtifactProof{Pid: in.pid, Want: want, Sentence: fmt.Sprintf("Which artifact runs cannot be proven: %s.", err)}
	}
	var digest, path string
	switch {
	case s.InvocationID != in.invocation || s.MainPID != in.pid || s.ActiveState != "active":
		err = fmt.Errorf("%s no longer runs start %s as pid %d: %s", UnitName(in.name), short(in.invocation), in.pid, s.sentence(in.name))
	default:
		digest, path, err = r.exeDigest(in.pid)
		if err == nil {
			// The pid could have ended and been reused while it was read.
			if again, serr := r.state(ctx, in.name); serr != nil || again.MainPID != in.pid || again.InvocationID != in.invocation {
				err = fmt.Errorf("%s's main process ended while its executable was read", UnitName(in.name))
			}
		}
	}
	pr := hoststep.ProveExecutable(in.pid, want, digest, path, err, func() bool { return r.isScript(ctx, want) })
	pr.Start = s.InvocationID
	pr.Facts = map[string]string{
		"invocation":     s.InvocationID,
		"mainPid":        strconv.Itoa(s.MainPID),
		"activeState":    s.ActiveState,
		"subState":       s.SubState,
		"result":         s.Result,
		"execMainStatus": strconv.Itoa(s.ExecMainStatus),
		"restarts":       strconv.Itoa(s.NRestarts),
	}
	return pr
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// exeDigest hashes what pid runs, through /proc/<pid>/exe of the host
// systemd runs, which opens the file the kernel maps even if the path was
// replaced.
func (r *Runtime) exeDigest(pid int) (digest, path string, err error) {
	link := r.host("/proc/" + strconv.Itoa(pid) + "/exe")
	if path, err = os.Readlink(link); err != nil {
		return "", "", fmt.Errorf("read the executable of pid %d: %w", pid, err)
	}
	f, err := os.Open(link)
	if err != nil {
		return "", "", fmt.Errorf("open the executable of pid %d: %w", pid, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", "", fmt.Errorf("hash the executable of pid %d: %w", pid, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), path, nil
}

// isScript reports whether the artifact digest starts with "#!".
func (r *Runtime) isScript(ctx context.Context, digest string) bool {
	if r.Artifacts == nil {
		return false
	}
	rc, err := r.Artifacts.Open(ctx, digest)
	if err != nil {
		return false
	}
	defer rc.Close()
	head := make([]byte, 2)
	n, _ := io.ReadFull(rc, head)
	return bytes.Equal(head[:n], []byte("#!"))
}

// Probe implements hoststep.Runtime with the shared probe, watching
// systemd's account of the start.
func (r *Runtime) Probe(ctx context.Context, inst hoststep.Instance, pr *servicespec.Probe, timeout time.Duration) *hoststep.ProbeReport {
	return hoststep.ProbeInstance(ctx, inst, pr, timeout)
}

// Inspect implements hoststep.Runtime: the unit file and its marker, what
// systemd holds of it (an edit it has not reloaded, the state of the last
// start), the artifact that runs and, when asked, the probe.
func (r *Runtime) Inspect(ctx context.Context, req hoststep.InspectRequest) (*hoststep.Inspection, error) {
	name := req.Name
	in := &hoststep.Inspection{Name: name, Runtime: Name, UnitPath: r.unitFile(name)}
	text, err := r.UnitText(ctx, name)
	switch {
	case err != nil:
		in.UnitError = err.Error()
	case text != nil:
		in.UnitHash = hash(text)
		got, digest := markers(text)
		if got == name {
			in.UnitDigest = digest
		} else {
			in.Drift = append(in.Drift, hoststep.Finding{
				Fact:    fmt.Sprintf("The unit %s no longer carries sluice's marker.", UnitName(name)),
				Proof:   fmt.Sprintf("%s has no %s=%s line: it is someone else's now, and sluice will not touch it.", in.UnitPath, markerService, name),
				Foreign: true,
			})
		}
	}
	s, err := r.state(ctx, name)
	if err != nil {
		return nil, err
	}
	if s.NeedDaemonReload {
		in.Drift = append(in.Drift, hoststep.Finding{
			Fact:  fmt.Sprintf("The unit file of %s was changed after systemd loaded it.", UnitName(name)),
			Proof: "systemd says NeedDaemonReload=yes: what runs is not what the file on disk says.",
		})
	}
	if s.ActiveState != "active" || s.MainPID == 0 {
		in.NotRunning = s.sentence(name)
		return in, nil
	}
	inst := &instance{r: r, name: name, invocation: s.InvocationID, pid: s.MainPID}
	in.Running, in.Pid = true, s.MainPID
	if req.Want != "" {
		in.Artifact = r.Prove(ctx, inst, req.Want)
	}
	if req.Probe {
		in.Probe = r.Probe(ctx, inst, req.ProbeSpec, time.Duration(req.ProbeTimeoutSec)*time.Second)
	}
	return in, nil
}

// instance is one start of a unit: its InvocationID and main process.
type instance struct {
	r          *Runtime
	name       string
	invocation string
	pid        int
}

func (i *instance) Pid() int { return i.pid }

// now reads the unit's state with a bound of its own: the probe asks often.
func (i *instance) now() (*state, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return i.r.state(ctx, i.name)
}

// Alive is true while systemd runs this same start with this main process.
func (i *instance) Alive() bool {
	s, err := i.now()
	return err == nil && s.ActiveState == "active" && s.InvocationID == i.invocation && s.MainPID == i.pid && i.pid != 0
}

// Exited is true once this start no longer runs; the exit is systemd's
// account of its main process, or says that another start replaced it.
func (i *instance) Exited() (bool, *hoststep.Exit) {
	s, err := i.now()
	if err != nil {
		return false, nil // not known: the probe asks again
	}
	if s.ActiveState == "active" && s.InvocationID == i.invocation && s.MainPID == i.pid && i.pid != 0 {
		return false, nil
	}
	if s.InvocationID != i.invocation {
		return true, &hoststep.Exit{Code: -1, Error: fmt.Sprintf("systemd started %s again meanwhile (invocation %s)", UnitName(i.name), short(s.InvocationID))}
	}
	if s.ActiveState == "activating" || s.ActiveState == "deactivating" {
		return false, nil
	}
	return true, s.exit()
}

// LastLines is the journal of this start.
func (i *instance) LastLines(n int) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	return i.r.lastLines(ctx, i.invocation, n)
}
