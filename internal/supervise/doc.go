// Package supervise runs one long-lived process per service name, detached
// from the sluice process, so that a service keeps running when sluice
// restarts and a later sluice process can adopt it again.
//
// Start does not run the service itself. It launches a shim: the same
// executable re-run as "<exe> __sluice-shim <dir> <logMaxBytes>", in its own
// session, whose main calls ShimMain first. The shim starts the service as
// its child in a process group of its own, copies the child's stdout and
// stderr into a size-capped output.log, and when the child exits writes
// exit.json and exits. Because the shim, not sluice, is the parent, the exit
// status is never lost and the log stays capped while sluice is down.
//
// Each service keeps its state in <Root>/<name>/:
//
//	spec.json     the Spec the shim runs, written by Start
//	pid.json      the child's and the shim's pid and start time, written by the shim
//	exit.json     how the child ended, written by the shim
//	output.log    the child's stdout and stderr; output.log.1 is the previous part
//	shim.log      the shim's own diagnostics
//	lock          held with flock while Start or Stop changes the service
//
// A pid alone is never trusted: pid.json records the start time from
// /proc/<pid>/stat (field 22, in clock ticks since boot), and a process counts
// as the service only while that start time matches and it is not a zombie.
// Zombies count as dead because PID 1 does not reap orphans on every host.
//
// The package needs Linux: it reads /proc.
package supervise
