package servicespec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Systemd is what a systemd service's unit carries beyond what every
// runtime runs (the artifact, its arguments and environment, the working
// directory, the stop timeout): the options operators set on real units.
// Every value is checked here, so that none can add a line or a directive
// to the unit the systemd runtime renders.
type Systemd struct {
	// User runs the service as this user (User=); "" runs it as the
	// manager's user (root for the system manager) unless DynamicUser.
	User string `json:"user,omitempty"`
	// DynamicUser runs the service as a user systemd allocates for it.
	DynamicUser bool `json:"dynamicUser,omitempty"`
	// Restart is systemd's Restart=: "no" (the default, so that the probe's
	// verdict stays honest), "on-failure" or "always".
	Restart string `json:"restart,omitempty"`
	// MemoryMax caps memory (MemoryMax=): bytes with an optional K, M, G or
	// T suffix, a percentage, or "infinity".
	MemoryMax string `json:"memoryMax,omitempty"`
	// CPUQuota caps CPU time (CPUQuota=), as a percentage such as "50%".
	CPUQuota string `json:"cpuQuota,omitempty"`
	// NoNewPrivileges forbids the service and its children gaining
	// privileges (NoNewPrivileges=yes).
	NoNewPrivileges bool `json:"noNewPrivileges,omitempty"`
	// ProtectSystem mounts the system read-only (ProtectSystem=): "true",
	// "full" or "strict"; "" leaves it off.
	ProtectSystem string `json:"protectSystem,omitempty"`
	// StateDirectory is a directory under /var/lib that systemd creates and
	// owns for the service (StateDirectory=), relative.
	StateDirectory string `json:"stateDirectory,omitempty"`
}

// RestartPolicies lists the valid values of spec.systemd.restart.
var RestartPolicies = []string{"no", "on-failure", "always"}

// ProtectSystemValues lists the valid values of spec.systemd.protectSystem.
var ProtectSystemValues = []string{"true", "full", "strict"}

var (
	unixUserRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	memoryRE   = regexp.MustCompile(`^([0-9]{1,19}[KMGT]?|[0-9]{1,3}%|infinity)$`)
	cpuQuotaRE = regexp.MustCompile(`^[0-9]{1,5}%$`)
	stateDirRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)
)

// check refuses what the systemd runtime could not render safely, each
// with a sentence that completes "<path>: ". A nil Systemd is no options.
func (o *Systemd) check() error {
	if o == nil {
		return nil
	}
	if o.User != "" && !unixUserRE.MatchString(o.User) {
		return fmt.Errorf(`has "spec.systemd.user" %q that is not a user name (lowercase letters, digits, "_" and "-", at most 32)`, o.User)
	}
	if o.User != "" && o.DynamicUser {
		return fmt.Errorf(`has both "spec.systemd.user" and "spec.systemd.dynamicUser"; give one of them`)
	}
	if o.Restart != "" && !slices.Contains(RestartPolicies, o.Restart) {
		return fmt.Errorf(`has "spec.systemd.restart" %q; give one of %s, or leave it out for no`, o.Restart, strings.Join(RestartPolicies, ", "))
	}
	if o.MemoryMax != "" && !memoryRE.MatchString(o.MemoryMax) {
		return fmt.Errorf(`has "spec.systemd.memoryMax" %q; give bytes with an optional K, M, G or T (512M), a percentage, or infinity`, o.MemoryMax)
	}
	if o.CPUQuota != "" && !cpuQuotaRE.MatchString(o.CPUQuota) {
		return fmt.Errorf(`has "spec.systemd.cpuQuota" %q; give a percentage such as 50%%`, o.CPUQuota)
	}
	if o.ProtectSystem != "" && !slices.Contains(ProtectSystemValues, o.ProtectSystem) {
		return fmt.Errorf(`has "spec.systemd.protectSystem" %q; give one of %s, or leave it out`, o.ProtectSystem, strings.Join(ProtectSystemValues, ", "))
	}
	if d := o.StateDirectory; d != "" && (!stateDirRE.MatchString(d) || slices.Contains(strings.Split(d, "/"), "..") || slices.Contains(strings.Split(d, "/"), ".")) {
		return fmt.Errorf(`has "spec.systemd.stateDirectory" %q; give a relative path under /var/lib such as "web" (letters, digits, "_", "-", "." and "/", no "..")`, d)
	}
	return nil
}
