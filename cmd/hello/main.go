// Command hello is a small HTTP service for sluice's exec runtime: the
// `make run` demo deploys it, and the tests run it as a real process.
//
//	hello [--port N | --listen ADDR]
//	hello --check URL
//
// GET /healthz answers 200 "ok"; GET / answers JSON with the version, pid,
// arguments and environment. Its version is set at build time:
//
//	go build -ldflags "-X main.version=v2" ./cmd/hello
//
// Environment switches make it misbehave the ways a real service does:
//
//	HELLO_EXIT_CODE=N      print a line to stdout and stderr and exit N at once
//	HELLO_START_DELAY=5s   wait before listening (a slow start)
//	HELLO_START_GATE=FILE  wait before listening until FILE exists (at most 2 min)
//	HELLO_HEALTH=fail      /healthz answers 503
//
// HELLO_HASH_ENV=A,B names variables that hold secrets: GET / shows each
// as "sha256:" and the hex SHA-256 of its value, never the value.
//
// A build with -ldflags "-X main.exitCode=3" exits like HELLO_EXIT_CODE=3.
//
// hello --check URL asks URL once and exits 0 when it answers 2xx, else 1:
// a container's healthcheck in an image that has no other program.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// version and exitCode are set at build time with -ldflags -X. A build with
// exitCode set behaves as if HELLO_EXIT_CODE were: a broken release.
var (
	version  = "dev"
	exitCode = ""
)

func main() {
	port := flag.Int("port", 0, "listen on 127.0.0.1:`N`")
	listen := flag.String("listen", "", "listen on `ADDR` (host:port)")
	check := flag.String("check", "", "ask `URL` once: exit 0 when it answers 2xx, else 1")
	flag.Parse()
	if *check != "" {
		os.Exit(checkURL(*check))
	}
	addr := *listen
	if addr == "" {
		if *port == 0 {
			fmt.Fprintln(os.Stderr, "hello: give --port N or --listen ADDR")
			os.Exit(2)
		}
		addr = "127.0.0.1:" + strconv.Itoa(*port)
	}
	code := os.Getenv("HELLO_EXIT_CODE")
	if exitCode != "" {
		code = exitCode
	}
	if code != "" {
		n, _ := strconv.Atoi(code)
		fmt.Printf("hello %s: HELLO_EXIT_CODE is set, exiting with code %d\n", version, n)
		fmt.Fprintf(os.Stderr, "hello %s: fatal: asked to exit\n", version)
		os.Exit(n)
	}
	if d, err := time.ParseDuration(os.Getenv("HELLO_START_DELAY")); err == nil {
		fmt.Printf("hello %s: starting in %s\n", version, d)
		time.Sleep(d)
	}
	if gate := os.Getenv("HELLO_START_GATE"); gate != "" {
		fmt.Printf("hello %s: starting when %s exists\n", version, gate)
		for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(gate); err == nil {
				break
			}
		}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if os.Getenv("HELLO_HEALTH") == "fail" {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		for _, k := range strings.Split(os.Getenv("HELLO_HASH_ENV"), ",") {
			if v, ok := env[k]; ok && k != "" {
				sum := sha256.Sum256([]byte(v))
				env[k] = "sha256:" + hex.EncodeToString(sum[:])
			}
		}
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"version": version, "pid": os.Getpid(), "args": os.Args[1:], "env": env,
			"greeting": os.Getenv("GREETING"),
		})
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		fmt.Printf("hello %s: stopping\n", version)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Printf("hello %s: listening on %s\n", version, addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintf(os.Stderr, "hello %s: %v\n", version, err)
		os.Exit(1)
	}
}

// checkURL asks url once, within 5 s, and returns the exit code of a
// healthcheck: 0 for a 2xx answer, else 1.
func checkURL(url string) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hello --check: %v\n", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(os.Stderr, "hello --check: %s answered %s\n", url, resp.Status)
		return 1
	}
	return 0
}
