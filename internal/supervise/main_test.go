package supervise

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// roleEnv makes the test binary play a part other than the tests: the shim
// needs no variable (ShimMain looks at the first argument).
const roleEnv = "SUPERVISE_TEST_ROLE"

func TestMain(m *testing.M) {
	if ShimMain() {
		return
	}
	// A race-enabled binary sleeps a second before it exits, and the shims
	// and services here are this binary: that would make every Stop slow.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	switch os.Getenv(roleEnv) {
	case "service":
		serviceMain()
	case "starter":
		starterMain()
	}
	os.Exit(m.Run())
}

// serviceMain is the service the tests supervise: an HTTP server on a free
// loopback port that it prints as "listening <addr>", serving /healthz and
// /env (its environment as a JSON object) and printing a line per request.
// It exits 0 on SIGTERM (unless IGNORE_TERM is set) and 3 on SIGUSR1 or
// CRASH_AFTER_MS after start. FLOOD_BYTES makes it first print that many
// bytes and then "flood done".
func serviceMain() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	if os.Getenv("IGNORE_TERM") != "" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGTERM)
	}
	go func() {
		s := <-sigs
		if s == syscall.SIGTERM {
			fmt.Println("got SIGTERM")
			os.Exit(0)
		}
		fmt.Println("got SIGUSR1")
		os.Exit(3)
	}()
	if n, _ := strconv.Atoi(os.Getenv("FLOOD_BYTES")); n > 0 {
		line := strings.Repeat("x", 99) + "\n"
		for written := 0; written < n; written += len(line) {
			fmt.Print(line)
		}
		fmt.Println("flood done")
	}
	if ms, _ := strconv.Atoi(os.Getenv("CRASH_AFTER_MS")); ms > 0 {
		time.AfterFunc(time.Duration(ms)*time.Millisecond, func() {
			fmt.Println("crashing")
			os.Exit(3)
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println("listening", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		_ = json.NewEncoder(w).Encode(env)
	})
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path)
		mux.ServeHTTP(w, r)
	}))
	os.Exit(1)
}

// starterMain plays a sluice process that starts the service STARTER_NAME
// under STARTER_ROOT, prints "started <pid>" and then exits, or waits to be
// killed when STARTER_HANG is set.
func starterMain() {
	sup := &Supervisor{Root: os.Getenv("STARTER_ROOT")}
	p, err := sup.Start(context.Background(), os.Getenv("STARTER_NAME"), serviceSpec(nil))
	if err != nil {
		fmt.Println("start:", err)
		os.Exit(1)
	}
	fmt.Println("started", p.Pid())
	if os.Getenv("STARTER_HANG") != "" {
		time.Sleep(time.Hour)
	}
	os.Exit(0)
}

// serviceSpec returns a Spec that runs serviceMain with env added.
func serviceSpec(env map[string]string) Spec {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	full := map[string]string{roleEnv: "service", "GORACE": "atexit_sleep_ms=0"}
	for k, v := range env {
		full[k] = v
	}
	return Spec{Exec: exe, Env: full, StopTimeout: 5 * time.Second}
}
