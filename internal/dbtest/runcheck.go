package dbtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The run check: as a test's database is dropped, every journal run in it
// is validated against the API's schema of its action's params and result
// (httpapi/openapi.json, the served spec as generated), so a payload type
// that drifts from what the code stores fails the test that stored it.
// Runs of actions the spec does not list (test actions) are not checked.

var skipRunCheck sync.Map // testing.TB → true

// SkipRunCheck leaves t's runs unchecked: for a test that writes runs the
// code never would, such as a journal made in SQL for a view's figures.
func SkipRunCheck(t testing.TB) { skipRunCheck.Store(t, true) }

// runSchemas are the compiled params and result schemas of each action the
// spec lists, loaded once per test binary.
var runSchemas = sync.OnceValues(loadRunSchemas)

type runSchema struct{ params, result *jsonschema.Schema }

// eventData is the compiled schema of an event's data.
var eventData *jsonschema.Schema

func loadRunSchemas() (map[string]runSchema, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, errors.New("no source path for the spec")
	}
	path := filepath.Join(filepath.Dir(file), "..", "..", "httpapi", "openapi.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the spec: %w", err)
	}
	var spec struct {
		Components struct {
			Schemas map[string]struct {
				Discriminator struct {
					Mapping map[string]string `json:"mapping"`
				} `json:"discriminator"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("parse the spec: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return nil, err
	}
	const url = "https://sluice.test/openapi.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	schemas := spec.Components.Schemas
	mapping := schemas["Run"].Discriminator.Mapping
	if len(mapping) == 0 {
		return nil, errors.New("the spec's Run has no discriminator mapping")
	}
	out := make(map[string]runSchema, len(mapping))
	for action, ref := range mapping {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		var rs runSchema
		for _, field := range []string{"params", "result"} {
			if _, ok := schemas[name].Properties[field]; !ok {
				continue
			}
			s, err := c.Compile(url + "#/components/schemas/" + name + "/properties/" + field)
			if err != nil {
				return nil, fmt.Errorf("compile %s's %s: %w", name, field, err)
			}
			if field == "params" {
				rs.params = s
			} else {
				rs.result = s
			}
		}
		out[action] = rs
	}
	if eventData, err = c.Compile(url + "#/components/schemas/EventData"); err != nil {
		return nil, fmt.Errorf("compile EventData: %w", err)
	}
	return out, nil
}

// checkRuns validates the runs of the database at dbURL; see above.
func checkRuns(t testing.TB, dbURL string) {
	if _, skip := skipRunCheck.LoadAndDelete(t); skip {
		return
	}
	schemas, err := runSchemas()
	if err != nil {
		t.Errorf("run check: %v", err)
		return
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return // the test stopped the server; nothing to read
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id::text, action, params, result FROM journal_run`)
	if err != nil {
		return // not migrated, or dropped by the test
	}
	type row struct {
		id, action     string
		params, result []byte
	}
	var runs []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.action, &r.params, &r.result); err != nil {
			t.Errorf("run check: %v", err)
			return
		}
		runs = append(runs, r)
	}
	if rows.Err() != nil {
		return
	}
	checkEvents(t, conn, schemas)
	for _, r := range runs {
		rs, ok := schemas[r.action]
		if !ok {
			continue
		}
		for _, f := range []struct {
			field string
			raw   []byte
			s     *jsonschema.Schema
		}{{"params", r.params, rs.params}, {"result", r.result, rs.result}} {
			// As the API answers: an empty object or null is left out.
			if len(f.raw) == 0 || string(f.raw) == "{}" || string(f.raw) == "null" {
				continue
			}
			if f.s == nil {
				t.Errorf("run %s (%s) records %s %s, which the spec says it has none of", r.id, r.action, f.field, f.raw)
				continue
			}
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(f.raw)))
			if err != nil {
				t.Errorf("run %s (%s): %s: %v", r.id, r.action, f.field, err)
				continue
			}
			if err := f.s.Validate(v); err != nil {
				t.Errorf("run %s (%s) records %s the spec does not describe (regenerate with make generate, or fix its type):\n%s\n%v", r.id, r.action, f.field, f.raw, err)
			}
		}
	}
}

// checkEvents validates the data of every event of a run whose action the
// spec lists against EventData.
func checkEvents(t testing.TB, conn *pgx.Conn, schemas map[string]runSchema) {
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT e.run_id::text, e.seq, r.action, e.data FROM journal_event e
		JOIN journal_run r ON r.id = e.run_id WHERE e.data IS NOT NULL`)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var (
			run, action string
			seq         int32
			data        []byte
		)
		if err := rows.Scan(&run, &seq, &action, &data); err != nil {
			t.Errorf("event check: %v", err)
			return
		}
		if _, ok := schemas[action]; !ok || len(data) == 0 || string(data) == "null" || string(data) == "{}" {
			continue
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
		if err == nil {
			err = eventData.Validate(v)
		}
		if err != nil {
			t.Errorf("event %d of run %s (%s) carries data the spec does not describe (give it a kind of EventData, or regenerate with make generate):\n%s\n%v", seq, run, action, data, err)
		}
	}
}
