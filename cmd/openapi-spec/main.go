// Command openapi-spec prints the OpenAPI document that `sluice serve`
// serves, without a database. `make generate` writes it to
// httpapi/openapi.json (3.1, the reviewed contract) and
// internal/apiclient/openapi-3.0.json (3.0.3, the client generator's input).
//
// It is a command of its own, not a sluice subcommand, so that the spec can
// be written even when the generated client that sluice imports is stale.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"sluice/httpapi"
)

func main() {
	v30 := flag.Bool("3.0", false, "print the OpenAPI 3.0.3 downgrade instead of 3.1")
	flag.Parse()
	spec := httpapi.Spec()
	var (
		b   []byte
		err error
	)
	if *v30 {
		b, err = httpapi.Downgrade(spec)
	} else {
		b, err = json.Marshal(spec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi-spec:", err)
		os.Exit(1)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		fmt.Fprintln(os.Stderr, "openapi-spec:", err)
		os.Exit(1)
	}
	out.WriteByte('\n')
	_, _ = os.Stdout.Write(out.Bytes())
}
