package supervise

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procInfo is what sluice reads from /proc/<pid>/stat.
type procInfo struct {
	State     byte   // 'R', 'S', 'Z' …
	StartTime uint64 // field 22: clock ticks after boot
}

// readProc returns the state and start time of pid, or an error wrapping
// os.ErrNotExist when there is no such process.
func readProc(pid int) (procInfo, error) {
	if pid <= 0 {
		return procInfo{}, fmt.Errorf("pid %d: %w", pid, os.ErrNotExist)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	return parseStat(b)
}

// parseStat parses the content of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may itself hold spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStat(b []byte) (procInfo, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, errors.New("parse stat: no command name")
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procInfo{}, errors.New("parse stat: too few fields")
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procInfo{}, fmt.Errorf("parse stat start time: %w", err)
	}
	return procInfo{State: fields[0][0], StartTime: start}, nil
}

// running reports whether pid is a live (not zombie) process that started at
// startTime, so that a reused pid never counts.
func running(pid int, startTime uint64) bool {
	info, err := readProc(pid)
	return err == nil && info.State != 'Z' && info.StartTime == startTime
}

// writeJSONAtomic writes v as JSON to path through a temporary file and a
// rename, so that a reader sees the old content or the new, never a part.
func writeJSONAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly after the rename
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// readJSON decodes the JSON file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", filepath.Base(path), err)
	}
	return nil
}

// closeOnExecAll marks every open descriptor above stderr close-on-exec.
// Go opens its own that way, but a descriptor inherited from whoever started
// this process is not, and would reach the service: a parent that waits for a
// pipe's end (a shell, a test runner) would then wait for the service as well.
func closeOnExecAll() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd) // the ReadDir descriptor is gone by now: harmless
		}
	}
	return nil
}
