// Package terraform runs the Terraform CLI for sluice's infrastructure
// units. Each unit gets a generated root module (see WriteRoot) that calls
// the unit's module with its inputs and keeps its state in PostgreSQL,
// through Terraform's built-in pg backend, in a schema of its own. A Runner
// then runs init, plan, apply, destroy and state commands in that root.
//
// The connection string reaches terraform only as the PG_CONN_STR variable
// of its process: it is never written to a file or an argument. Terraform
// runs with a minimal environment (not sluice's, which holds secrets), in a
// process group of its own, and every excerpt of its output and every error
// passes through a redactor.
//
// Two behaviours of the pg backend shape this package. While a schema holds
// no state yet, terraform takes a database-wide advisory lock (-1) for as
// long as the command runs, so the first plan of one unit would make every
// other unit's commands on the same database fail. Init therefore writes an
// empty state when there is none, which holds that lock for milliseconds,
// and commands wait for locks up to Runner.LockTimeout instead of failing.
// And every command creates the backend's schema, table and a sequence in
// public "IF NOT EXISTS", which two first commands at once can collide on;
// Init runs again when it loses that race.
package terraform

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"sluice/internal/errs"
	"sluice/internal/redact"
)

// EnvBin names the variable cmd/ reads to point LookPath at a binary.
const EnvBin = "SLUICE_TERRAFORM_BIN"

// LookPath resolves the terraform binary: bin when set (from
// SLUICE_TERRAFORM_BIN; a path, or a name looked up on PATH), else
// "terraform" on PATH. It returns an absolute path. A missing binary is an
// *errs.Error with Code errs.Unavailable that says how to get one.
func LookPath(bin string) (string, error) {
	what := `"terraform" on PATH`
	if bin != "" {
		what = fmt.Sprintf("%s=%s", EnvBin, bin)
	}
	p, err := exec.LookPath(cmp.Or(bin, "terraform"))
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err != nil {
		return "", errs.Errorf(errs.Unavailable,
			"Terraform was not found (looked for %s); install Terraform, set %s to its path, or run `make ensure-tools`, which builds v1.5.7 into ./bin.",
			what, EnvBin)
	}
	return p, nil
}

// Defaults of Runner's fields.
const (
	DefaultMaxOutput   = 16 << 10
	DefaultLockTimeout = time.Minute
	DefaultStopGrace   = 5 * time.Second
)

// Runner runs terraform commands in generated roots. Its fields are read at
// each call; it holds no other state and is safe for concurrent use, but two
// commands must not run in the same root at once (the caller serializes per
// unit; the state lock would refuse the second anyway).
type Runner struct {
	// Bin is the absolute path of terraform (see LookPath). Required.
	Bin string
	// ConnStr is the PostgreSQL connection string of the database holding
	// the states, as a libpq URL or key=value string. It is passed only as
	// PG_CONN_STR in terraform's environment. pgx-only URL parameters
	// (pool_*) are removed, because terraform's driver sends unknown ones to
	// the server, which refuses them. Note that terraform's driver (lib/pq)
	// defaults to sslmode=require over TCP, where pgx prefers.
	ConnStr string
	// Redactor scrubs every output excerpt and error. ConnStr's password is
	// added to it. Default redact.Default.
	Redactor *redact.Redactor
	// MaxOutput is how many bytes of output an excerpt keeps: the end, where
	// the errors are. Default DefaultMaxOutput (16 KiB).
	MaxOutput int
	// LockTimeout is how long a command waits for the state lock. Another
	// command of the same unit may hold it, and, for an instant, any unit
	// whose first state is being written in the same database. Default
	// DefaultLockTimeout (1 minute); terraform retries after 1, 2, 4, 8 and
	// then every 16 seconds.
	LockTimeout time.Duration
	// StopGrace is how long terraform gets to stop after SIGINT when the
	// context ends, before it and its children get SIGKILL. Default
	// DefaultStopGrace (5 s).
	StopGrace time.Duration
	// CLIConfigFile is a Terraform CLI configuration for terraform to use,
	// for example a provider_installation block with a filesystem mirror.
	// Default /dev/null: nothing from the host's ~/.terraformrc applies.
	CLIConfigFile string
	// RedactState makes Plan, Destroy and an Apply without a plan file
	// first register with Redactor the strings the unit's state holds at
	// paths terraform marked sensitive (see redactSensitiveState). It costs
	// a state pull; set it for a root that takes secrets. Default false.
	RedactState bool
	// Env holds extra KEY=VALUE variables for terraform's process, such as
	// provider credentials and the values of the root's variables (see
	// VarEnv); their secrets must be added to the Redactor by the caller.
	// The Runner's own variables win over them. Default none: terraform
	// gets only PATH, HOME, TMPDIR and what the Runner sets.
	Env []string
}

// CommandError is a terraform command that failed: it exited with a code
// that means failure, was stopped because its context ended, or could not
// start.
type CommandError struct {
	Op       string // the command, as "plan" or "state rm"
	ExitCode int    // its exit code; -1 when it did not exit on its own
	// Summary is terraform's first error, "Summary: detail", or the last
	// line of output when it printed no error. Redacted.
	Summary string
	// Output is the end of the command's output (stdout and stderr
	// interleaved), capped at MaxOutput and redacted.
	Output string
	// Err is why the command did not exit on its own: the context's error,
	// or why it could not start. Nil when it exited.
	Err error
}

func (e *CommandError) Error() string {
	switch {
	case errors.Is(e.Err, context.Canceled), errors.Is(e.Err, context.DeadlineExceeded):
		return fmt.Sprintf("terraform %s was stopped: %v.", e.Op, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("terraform %s did not run: %v.", e.Op, e.Err)
	case e.Summary == "":
		return fmt.Sprintf("terraform %s failed (exit %d).", e.Op, e.ExitCode)
	}
	return fmt.Sprintf("terraform %s failed (exit %d): %s", e.Op, e.ExitCode, e.Summary)
}

func (e *CommandError) Unwrap() error { return e.Err }

// Init runs terraform init in dir, which WriteRoot wrote. It is safe to run
// again: -reconfigure takes the backend configuration as it is written
// without asking to migrate state. Then, when the unit's schema holds no
// state yet, it writes an empty one (see the package doc).
func (r *Runner) Init(ctx context.Context, dir string) error {
	for attempt := 1; ; attempt++ {
		_, err := r.run(ctx, call{op: "init", dir: dir, args: []string{"init", "-input=false", "-no-color", "-reconfigure"}})
		if err == nil {
			break
		}
		if attempt == initAttempts || !catalogRace(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
	return r.ensureState(ctx, dir)
}

// initAttempts bounds the inits that lose a catalog race.
const initAttempts = 4

// catalogRace reports whether a command failed because another one created
// the same database object at the same moment. Every command of the pg
// backend runs CREATE SCHEMA/SEQUENCE/TABLE/INDEX IF NOT EXISTS, which
// PostgreSQL does not make safe against a concurrent creation: the loser
// violates a unique index of the catalog (pg_class_relname_nsp_index and
// the like) or finds the type, relation or schema already there. Once the
// objects exist the statements do nothing, so only the first commands of a
// unit, and of a database, can lose; running them again succeeds.
func catalogRace(err error) bool {
	var ce *CommandError
	return errors.As(err, &ce) && ce.Err == nil && catalogRaceRE.MatchString(ce.Output)
}

var catalogRaceRE = regexp.MustCompile(`pq: (duplicate key value violates unique constraint "pg_|(type|relation|schema|sequence) "[^"]*" already exists)`)

// stateHeader is the part of a state that tells whether one exists.
type stateHeader struct {
	Lineage string `json:"lineage"`
}

// ensureState writes an empty state when the workspace has none. Two Inits
// of one unit may race: the loser's push is refused (another lineage), and
// the state it then finds is as good.
func (r *Runner) ensureState(ctx context.Context, dir string) error {
	exists := func() (bool, error) {
		res, err := r.run(ctx, call{op: "state pull", dir: dir, args: []string{"state", "pull"}, stdout: true})
		if err != nil {
			return false, err
		}
		var st stateHeader
		if len(bytes.TrimSpace(res.stdout)) > 0 {
			if err := json.Unmarshal(res.stdout, &st); err != nil {
				return false, fmt.Errorf("terraform state pull: read the state: %w", err)
			}
		}
		return st.Lineage != "", nil
	}
	ok, err := exists()
	if err != nil || ok {
		return err
	}
	empty := fmt.Sprintf(`{"version":4,"serial":0,"lineage":%q,"outputs":{},"resources":[]}`, uuid.NewString())
	_, err = r.run(ctx, call{op: "state push", dir: dir, stdin: strings.NewReader(empty),
		args: []string{"state", "push", r.lockTimeout(), "-"}})
	if err == nil {
		return nil
	}
	if ok, perr := exists(); perr == nil && ok {
		return nil
	}
	return err
}

// Apply runs terraform apply in dir. With a planFile (from Plan, relative
// to dir or absolute) it applies exactly that plan, and fails when the
// state moved since ("Saved plan is stale"); with "" it plans and applies in
// one go (-auto-approve). It returns the output's excerpt, also on failure.
//
// The plan file is removed once apply has run, whatever the outcome: a
// saved plan holds the values of the root's variables in plaintext,
// sensitive ones included, and it applies once at most anyway.
func (r *Runner) Apply(ctx context.Context, dir, planFile string) (excerpt string, err error) {
	args := []string{"apply", "-input=false", "-no-color", r.lockTimeout()}
	if planFile == "" {
		if err := r.beforePlan(ctx, dir); err != nil {
			return "", err
		}
		args = append(args, "-auto-approve")
	} else {
		p := planFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		defer os.Remove(p)
		args = append(args, planFile)
	}
	res, err := r.run(ctx, call{op: "apply", dir: dir, args: args})
	return excerptOf(res, err), err
}

// Destroy runs terraform destroy -auto-approve in dir: every resource in the
// unit's state is destroyed, and the state is left empty. It returns the
// output's excerpt, also on failure.
func (r *Runner) Destroy(ctx context.Context, dir string) (excerpt string, err error) {
	if err := r.beforePlan(ctx, dir); err != nil {
		return "", err
	}
	res, err := r.run(ctx, call{op: "destroy", dir: dir,
		args: []string{"destroy", "-auto-approve", "-input=false", "-no-color", r.lockTimeout()}})
	return excerptOf(res, err), err
}

// beforePlan runs before a command that prints a plan.
func (r *Runner) beforePlan(ctx context.Context, dir string) error {
	if !r.RedactState {
		return nil
	}
	return r.redactSensitiveState(ctx, dir)
}

// StateRm removes addr (a resource, instance or module address) from the
// unit's state without destroying it: the next plan creates it again. An
// address that is not in the state is a *CommandError.
func (r *Runner) StateRm(ctx context.Context, dir, addr string) error {
	if addr == "" || strings.HasPrefix(addr, "-") {
		return errs.Errorf(errs.Invalid, "The state address %q is not a resource address; name one such as module.main.terraform_data.vpc.", addr)
	}
	_, err := r.run(ctx, call{op: "state rm", dir: dir, args: []string{"state", "rm", r.lockTimeout(), addr}})
	return err
}

// StateList returns the resource instance addresses in the unit's state,
// sorted; none for an empty state.
func (r *Runner) StateList(ctx context.Context, dir string) ([]string, error) {
	res, err := r.run(ctx, call{op: "state list", dir: dir, args: []string{"state", "list"}, stdout: true})
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(res.stdout)) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Version returns terraform's version, as "1.11.4".
func (r *Runner) Version(ctx context.Context) (string, error) {
	res, err := r.run(ctx, call{op: "version", dir: os.TempDir(), args: []string{"version", "-json"}, stdout: true})
	if err != nil {
		return "", err
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(res.stdout, &v); err != nil || v.Version == "" {
		return "", fmt.Errorf("terraform version: unexpected output %q", r.redactor().String(truncate(string(res.stdout), 200)))
	}
	return v.Version, nil
}

// call is one terraform command.
type call struct {
	op     string // for errors: "plan", "state rm"
	dir    string
	args   []string
	stdin  io.Reader // nil: no input
	ok     []int     // exit codes that mean success; default 0
	stdout bool      // keep stdout whole in result.stdout, apart from the excerpt
}

type result struct {
	exitCode int
	output   string // the excerpt: capped, redacted
	stdout   []byte // when call.stdout
}

func (r *Runner) redactor() *redact.Redactor {
	if r.Redactor != nil {
		return r.Redactor
	}
	return redact.Default
}

func (r *Runner) lockTimeout() string {
	return fmt.Sprintf("-lock-timeout=%ds", int(cmp.Or(r.LockTimeout, DefaultLockTimeout)/time.Second))
}

// run runs one terraform command in its own process group, with its own
// environment. When ctx ends, the group gets SIGINT, on which terraform
// stops cleanly (it stops its provisioners, lets calls in flight finish and
// writes the state), then SIGKILL when terraform has exited or after
// StopGrace, whichever comes first, so that nothing it started outlives it.
func (r *Runner) run(ctx context.Context, c call) (*result, error) {
	red := r.redactor()
	if pw := connPassword(r.ConnStr); pw != "" {
		red.Add(pw)
	}
	if r.Bin == "" {
		return nil, errs.Errorf(errs.Unavailable, "The Terraform binary is not set; resolve it with LookPath before running terraform %s.", c.op)
	}
	if err := ctx.Err(); err != nil {
		return nil, &CommandError{Op: c.op, ExitCode: -1, Err: err}
	}
	maxOut := cmp.Or(r.MaxOutput, DefaultMaxOutput)
	tail := &tailBuffer{max: maxOut + 4<<10} // slack, so a secret across the cut is still whole
	cmd := exec.Command(r.Bin, c.args...)
	cmd.Dir = c.dir
	cmd.Env = r.env()
	cmd.Stdin = c.stdin
	cmd.Stdout, cmd.Stderr = tail, tail
	var stdout bytes.Buffer
	if c.stdout {
		cmd.Stdout = &stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that outlives terraform and keeps the pipe open must not
	// block Wait for ever.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, &CommandError{Op: c.op, ExitCode: -1, Err: red.Error(err)}
	}

	var stopped atomic.Bool
	done := make(chan struct{})    // terraform exited and was reaped
	stopper := make(chan struct{}) // the goroutine below returned
	go func() {
		defer close(stopper)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		select {
		case <-done: // both were ready: never signal a reaped process's group
			return
		default:
		}
		stopped.Store(true)
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGINT)
		t := time.NewTimer(cmp.Or(r.StopGrace, DefaultStopGrace))
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		// Also when terraform did stop: a provisioner's child it left
		// behind is still in the group.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}()
	waitErr := cmd.Wait()
	close(done)
	<-stopper

	res := &result{exitCode: cmd.ProcessState.ExitCode(), output: tail.excerpt(red, maxOut), stdout: stdout.Bytes()}
	if stopped.Load() {
		return res, &CommandError{Op: c.op, ExitCode: -1, Output: res.output, Summary: summarize(res.output), Err: ctx.Err()}
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return res, &CommandError{Op: c.op, ExitCode: -1, Output: res.output, Err: red.Error(waitErr)}
	}
	ok := c.ok
	if ok == nil {
		ok = []int{0}
	}
	if !slices.Contains(ok, res.exitCode) {
		return res, &CommandError{Op: c.op, ExitCode: res.exitCode, Output: res.output, Summary: summarize(res.output)}
	}
	return res, nil
}

// env is terraform's whole environment: not sluice's, which holds secrets.
// TF_PLUGIN_CACHE_DIR and TF_DATA_DIR are left unset on purpose.
func (r *Runner) env() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, r.Env...)
	env = append(env,
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"CHECKPOINT_DISABLE=1", // no version check against checkpoint-api.hashicorp.com
		"TF_CLI_CONFIG_FILE="+cmp.Or(r.CLIConfigFile, os.DevNull),
	)
	if r.ConnStr != "" {
		env = append(env, "PG_CONN_STR="+backendConnStr(r.ConnStr))
	}
	return env
}

// backendConnStr drops the pgx-only parameters from a URL connection
// string: lib/pq would send them to the server as settings.
func backendConnStr(conn string) string {
	u, err := url.Parse(conn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return conn
	}
	q := u.Query()
	changed := false
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
			changed = true
		}
	}
	if !changed {
		return conn
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// connPassword returns the password in conn, or "".
func connPassword(conn string) string {
	if conn == "" {
		return ""
	}
	if u, err := url.Parse(conn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if pw, ok := u.User.Password(); ok {
			return pw
		}
		if pw := u.Query().Get("password"); pw != "" {
			return pw
		}
	}
	if cfg, err := pgconn.ParseConfig(conn); err == nil {
		return cfg.Password
	}
	return ""
}

// excerptOf is the output excerpt of a command that ran, or "".
func excerptOf(res *result, err error) string {
	if res != nil {
		return res.output
	}
	var ce *CommandError
	if errors.As(err, &ce) {
		return ce.Output
	}
	return ""
}

// summarize returns terraform's first error as "Summary: detail", or the
// last non-empty line when there is none. With -no-color a diagnostic is
// "Error: Summary", a blank line, an indented source snippet, and a detail
// paragraph.
func summarize(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		summary, ok := strings.CutPrefix(strings.TrimRight(l, " \r"), "Error: ")
		if !ok {
			continue
		}
		var detail []string
	paragraph:
		for _, d := range lines[i+1:] {
			d = strings.TrimRight(d, " \r")
			switch {
			case len(detail) == 0 && (d == "" || strings.HasPrefix(d, " ") || d == "(source code not available)"):
				// the blank line and the source snippet before the detail
			case d == "", strings.HasPrefix(d, " "), strings.HasPrefix(d, "Error: "),
				strings.HasSuffix(d, ":") && len(detail) > 0:
				break paragraph
			default:
				detail = append(detail, d)
			}
		}
		s := strings.TrimSpace(summary)
		if len(detail) > 0 {
			s += ": " + strings.Join(detail, " ")
		}
		return truncate(sentence(s), 400)
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && l != truncatedMark {
			return truncate(sentence(l), 400)
		}
	}
	return ""
}

func sentence(s string) string {
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// truncatedMark starts an excerpt whose beginning was cut.
const truncatedMark = "[…earlier output cut]"

// tailBuffer keeps the last max bytes or more written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		n := copy(t.buf, t.buf[len(t.buf)-t.max:])
		t.buf = t.buf[:n]
		t.cut = true
	}
	return len(p), nil
}

// excerpt returns the end of the output, redacted, at most max bytes plus a
// mark when the beginning was cut. A cut line is dropped whole, so no part
// of a secret survives a cut the redactor would not recognize.
func (t *tailBuffer) excerpt(red *redact.Redactor, max int) string {
	t.mu.Lock()
	s, cut := string(t.buf), t.cut
	t.mu.Unlock()
	if cut {
		s = dropFirstLine(s)
	}
	s = red.String(s)
	if len(s) > max {
		s, cut = dropFirstLine(s[len(s)-max:]), true
	}
	s = strings.ToValidUTF8(s, "")
	if cut {
		s = truncatedMark + "\n" + s
	}
	return s
}

func dropFirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
