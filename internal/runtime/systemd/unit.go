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
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"sluice/internal/errs"
	"sluice/internal/hoststep"
)

// toolTimeout bounds one run of systemd-analyze or journalctl.
const toolTimeout = 30 * time.Second

// tool runs one of systemd's tools where systemd runs, and returns its
// combined output.
func (r *Runtime) tool(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	if r.User {
		args = append(args[:1:1], append([]string{"--user"}, args[1:]...)...)
	}
	argv := append(append([]string{}, r.Command...), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	return cmd.CombinedOutput()
}

// owner says whose the unit of service name is: "" when sluice's (or there
// is none), else a sentence on whose it is.
func (r *Runtime) owner(ctx context.Context, name string) (string, error) {
	file := r.unitFile(name)
	text, err := os.ReadFile(file)
	switch {
	case err == nil:
		if got, _ := markers(text); got != name {
			return fmt.Sprintf("The unit %s at %s does not carry sluice's marker (%s=%s), so it is someone else's", UnitName(name), filepath.Join(r.UnitDir, UnitName(name)), markerService, name), nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	// systemd may load a unit of that name from elsewhere (/lib, /run).
	conn, err := r.bus(ctx)
	if err != nil {
		return "", err
	}
	p, err := conn.GetUnitPropertyContext(ctx, UnitName(name), "FragmentPath")
	if err != nil {
		return "", fmt.Errorf("ask systemd about %s: %w", UnitName(name), err)
	}
	frag, _ := p.Value.Value().(string)
	if frag != "" && frag != filepath.Join(r.UnitDir, UnitName(name)) {
		return fmt.Sprintf("systemd loads %s from %s, which sluice does not write, so it is someone else's", UnitName(name), frag), nil
	}
	return "", nil
}

// conflict is the error of a unit that is not sluice's.
func conflict(whose, name string) error {
	return errs.Errorf(errs.Conflict, "%s; it was left untouched. Rename service %s in Git, or remove that unit from the host.", whose, name)
}

// Validate implements hoststep.Runtime: the unit must be sluice's to
// replace, and systemd must accept it, unless the same text is in place
// (then nothing is written). The artifact is installed into
// ExeDir first (content-addressed: installing it changes nothing that
// runs), so that systemd checks the command it will run; the candidate is
// verified in StagingDir, so a unit that does not verify changes nothing.
func (r *Runtime) Validate(ctx context.Context, u *hoststep.Unit, exe string) error {
	name := u.Manifest.Service
	if whose, err := r.owner(ctx, name); err != nil {
		return err
	} else if whose != "" {
		return conflict(whose, name)
	}
	for _, k := range slices.Sorted(maps.Keys(u.Secrets)) {
		if !utf8.Valid(u.Secrets[k]) {
			return errs.Errorf(errs.Invalid, "Secret %s of variable %s of service %s is not UTF-8, which systemd does not pass in an environment; nothing on the host changed.", u.Manifest.Secrets[k], k, name)
		}
	}
	if err := r.install(exe, u.Manifest.ArtifactDigest); err != nil {
		return err
	}
	if now, err := os.ReadFile(u.Path); err == nil && bytes.Equal(now, u.Text) {
		return nil // in place already, verified when it was written: Write writes nothing
	}
	dir := r.host(r.StagingDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	staged := filepath.Join(dir, UnitName(name))
	if err := os.WriteFile(staged, u.Text, 0o644); err != nil {
		return fmt.Errorf("stage the unit of %s: %w", name, err)
	}
	defer os.Remove(staged)
	out, err := r.tool(ctx, "systemd-analyze", "verify", filepath.Join(r.StagingDir, UnitName(name)))
	if err != nil {
		return errs.Errorf(errs.Invalid, "systemd refuses the unit of %s, and nothing on the host changed: %s", name, strings.TrimSpace(verifyText(out, err)))
	}
	return nil
}

// verifyText is what systemd-analyze said, without the lines that only
// warn about other units.
func verifyText(out []byte, err error) string {
	var keep []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			keep = append(keep, line)
		}
	}
	if len(keep) == 0 {
		return err.Error()
	}
	return strings.Join(keep, "; ")
}

// install puts the verified copy exe of artifact digest at its place in
// ExeDir, unless the same bytes are there.
func (r *Runtime) install(exe, digest string) error {
	dst := r.host(r.exePath(digest))
	if ok, _ := hasDigest(dst, digest); ok {
		return nil
	}
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	in, err := os.Open(exe)
	if err != nil {
		return fmt.Errorf("install artifact %s: %w", digest, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, ".install-*")
	if err != nil {
		return fmt.Errorf("install artifact %s: %w", digest, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(tmp, h), in)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("install artifact %s: %w", digest, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return fmt.Errorf("install artifact %s: its bytes hash to %s", digest, got)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install artifact %s: %w", digest, err)
	}
	return nil
}

func hasDigest(path, digest string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, err
	}
	return "sha256:"+hex.EncodeToString(h.Sum(nil)) == digest, nil
}

// Write implements hoststep.Runtime: a temporary file in the unit
// directory, renamed into place, once the unit is sluice's to replace. A
// file that holds the text already is left as it is, so that systemd,
// which compares the file's time with what it loaded, needs no reload.
func (r *Runtime) Write(ctx context.Context, u *hoststep.Unit) error {
	name := u.Manifest.Service
	if whose, err := r.owner(ctx, name); err != nil {
		return err
	} else if whose != "" {
		return conflict(whose, name)
	}
	// The values first: the unit that names them may be in place already
	// (the same versions), and its file is what a restart reads.
	if err := r.writeSecrets(u); err != nil {
		return err
	}
	if now, err := os.ReadFile(u.Path); err == nil && bytes.Equal(now, u.Text) {
		return nil
	}
	dir := r.host(r.UnitDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".sluice-"+name+"-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(u.Text)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), u.Path)
}

// writeSecrets writes u's EnvironmentFile= (SecretsDir/NAME.env, the
// directory 0700 and the file 0600), or removes it when u takes no secret.
// Each value is double-quoted as systemd's environment file parser reads
// it: a backslash before ", \, ` and $, everything else (a line break
// too) as it is.
func (r *Runtime) writeSecrets(u *hoststep.Unit) error {
	path := r.host(r.secretsPath(u.Manifest.Service))
	if len(u.Secrets) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the secrets of %s: %w", u.Manifest.Service, err)
		}
		return nil
	}
	var b bytes.Buffer
	b.WriteString("# Written by sluice for " + UnitName(u.Manifest.Service) + ": its secrets' values.\n")
	for _, k := range slices.Sorted(maps.Keys(u.Secrets)) {
		b.WriteString(k + `="`)
		for _, c := range u.Secrets[k] {
			if c == '"' || c == '\\' || c == '`' || c == '$' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		b.WriteString("\"\n")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".secrets-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b.Bytes())
	clear(b.Bytes())
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the secrets of %s: %w", u.Manifest.Service, err)
	}
	return os.Rename(tmp.Name(), path)
}

// UnitText implements hoststep.Runtime.
func (r *Runtime) UnitText(_ context.Context, name string) ([]byte, error) {
	b, err := os.ReadFile(r.unitFile(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the unit of %s: %w", name, err)
	}
	return b, nil
}

// Names implements hoststep.Runtime: the services of the units in UnitDir
// that carry sluice's marker.
func (r *Runtime) Names(_ context.Context) ([]string, error) {
	ents, err := os.ReadDir(r.host(r.UnitDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "sluice-")
		if !ok {
			continue
		}
		if n, ok = strings.CutSuffix(n, ".service"); !ok {
			continue
		}
		text, err := os.ReadFile(filepath.Join(r.host(r.UnitDir), e.Name()))
		if err != nil {
			continue
		}
		if got, _ := markers(text); got == n {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// lastLines is up to n last lines the start invocation wrote, from its
// journal, oldest first. journald takes a moment to store what a process
// wrote just before it exited, so an empty answer is asked again briefly.
func (r *Runtime) lastLines(ctx context.Context, invocation string, n int) ([]string, error) {
	if invocation == "" || n <= 0 {
		return nil, nil
	}
	var lines []string
	// journald may not have written what the process printed yet, on a
	// loaded host well past a second (past five, seen on two cores busy
	// with engines and tests): ask it to (--sync, which a user's manager
	// may not be allowed; then the looks alone), and look again for up to
	// about fifteen seconds. Only a failed start waits here.
	for attempt := 0; attempt < 75; attempt++ {
		out, err := r.tool(ctx, "journalctl", "--no-pager", "-q", "-o", "cat", "-n", fmt.Sprint(n), "_SYSTEMD_INVOCATION_ID="+invocation)
		if err != nil {
			return nil, fmt.Errorf("read the journal of invocation %s: %s", invocation, strings.TrimSpace(verifyText(out, err)))
		}
		out = bytes.TrimRight(out, "\n")
		if len(out) > 0 {
			lines = strings.Split(string(out), "\n")
			break
		}
		if attempt%25 == 0 {
			_, _ = r.tool(ctx, "journalctl", "--sync")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return lines, nil
}
