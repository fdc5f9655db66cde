// Package hoststep is the host half of a service action: what runs on the
// node a service is placed on, and nothing else. It fetches the artifact by
// digest and verifies it, then has the service's runtime render, validate
// and write its unit, (re)start it, prove which bytes run, probe it, stop
// it, and inspect what runs for drift checks and status.
//
// A runtime is a room behind one seam, the Runtime interface: the verbs a
// host step is made of (render, validate, write, activate, prove, probe,
// stop and remove, inspect, adopt). Host orders them and keeps the receipt's
// phases and events; it never knows which runtime it drives. Runtimes live
// in packages of their own (internal/runtime/exec, sluice's own process
// supervisor, is the first) and are given to New by whoever builds the
// host: serve for its own node, `sluice agent` for every other.
//
// It holds no database, no Git and no credential: serve runs it in-process
// for its own node, and `sluice agent` runs it on every other host, with
// the steps a control-plane job dispatched to it (package nodetask). The
// control-plane half (sync, pin, push, receipts) stays in package services.
package hoststep
