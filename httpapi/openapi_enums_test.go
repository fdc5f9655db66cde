package httpapi_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/httpapi"
)

// stateWords are the last words of a property's name that make it a state,
// a kind or a choice: a client switches on its value, so the spec must list
// the values (or say here why it cannot).
var stateWords = []string{
	"action", "answer", "class", "decision", "event", "health", "kind", "level", "mode", "outcome",
	"phase", "policy", "role", "runtime", "scope", "stage", "state", "status", "tone", "type",
}

// openStrings are state-like properties that have no enum, and why.
var openStrings = map[string]string{
	// Run payloads: names and sentences, not values to switch on.
	"GitopsResult.decision":        "the line of the source's policy that decided, worded for an operator",
	"GitopsWebhookDelivery.event":  "the forge's own event name, as it sent it",
	"InfraSecretUse.scope":         "a source's name, or empty for a global secret",
	"ServicesConvergeParams.scope": "a source's name, or empty for a global secret",
	"JournalJobOpParams.kind":      "a River job kind, as River names it (RunAction lists those that keep a run)",
	// Commands and sentences, not values to switch on.
	"Application.action":                "a command line that moves it on",
	"NodeRow.action":                    "a command line that moves the row on",
	"StatusStage.action":                "a command line that moves the stage on",
	"StatusAnswerBlueprintState.action": "a command line that moves things on",
	"StatusAnswerInfraState.action":     "a command line that moves things on",
	"StatusAnswerServiceState.action":   "a command line that moves things on",
	"StatusAnswerSourceState.action":    "a command line that moves things on",
	"AcceptanceEvidence.decision":       "the policy line that decided, in words",
	"StatusGrant.policy":                "the policy line that decided, in words",
	"BlueprintView.answer":              "sentences saying what is true and what waits",
	// Values of someone else's vocabulary.
	"ErrorModel.type":                 "Huma's RFC 9457 type, a URI reference",
	"WebhookAnswer.event":             "the Git host's own event name",
	"Unit.kind":                       "what the unit's file says; a kind sluice does not act on is kept in the inventory",
	"NotificationDelivery.errorClass": "the first hex digits of a hash of the error sentence",
	// The Blueprint's stage states are written where each stage is
	// decided (internal/blueprint/status.go), not kept in one table as
	// services', sources' and infrastructures' are: until they are, the
	// states of any kind's stage cannot be listed from the code.
	"StatusAnswerBlueprintState.state": "a Blueprint's stage states are not one table yet",
	"StatusStage.state":                "any kind's stage state, a Blueprint's among them",
	"StatusSettled.state":              "any kind's stage state, a Blueprint's among them",
	"Application.state":                "a service's or a Blueprint's answer state",
}

// stringProps returns every string property of the spec's schemas by
// "Schema.property" (a nested object's as "Schema.outer.property"), with
// whether it has an enum.
func stringProps(t *testing.T) map[string]bool {
	t.Helper()
	b, err := json.Marshal(httpapi.Spec())
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	out := map[string]bool{}
	var walk func(name string, s map[string]any)
	walk = func(name string, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			p, _ := v.(map[string]any)
			if p == nil {
				continue
			}
			if typ := p["type"]; typ == "string" || slices.Contains(asSlice(typ), any("string")) {
				_, hasEnum := p["enum"]
				out[name+"."+k] = hasEnum
			}
			walk(name+"."+k, p)
			if items, ok := p["items"].(map[string]any); ok {
				walk(name+"."+k, items)
			}
		}
	}
	for name, s := range doc.Components.Schemas {
		walk(name, s)
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// lastWord is the last word of a camelCase name, lower-cased.
func lastWord(name string) string {
	i := strings.LastIndexFunc(name, func(r rune) bool { return r >= 'A' && r <= 'Z' })
	return strings.ToLower(name[max(i, 0):])
}

func TestOpenAPIEnums(t *testing.T) {
	t.Parallel()

	t.Run("EveryStateLikeStringHasAnEnumOrAReason", func(t *testing.T) {
		t.Parallel()
		props := stringProps(t)
		// The walk reaches properties with and without an enum.
		require.True(t, props["Run.state"])
		require.False(t, props["Run.target"])

		var missing []string
		withEnum, open := 0, 0
		for name, hasEnum := range props {
			prop := name[strings.LastIndex(name, ".")+1:]
			if !slices.Contains(stateWords, lastWord(prop)) {
				continue
			}
			if hasEnum {
				withEnum++
				continue
			}
			open++
			if _, ok := openStrings[name]; !ok {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		t.Logf("state-like strings: %d with an enum, %d without", withEnum, open)
		require.Empty(t, missing, "state-like string properties without an enum: give each an enum, or a reason in openStrings")
	})

	t.Run("OpenStringsAreStillOpen", func(t *testing.T) {
		t.Parallel()
		props := stringProps(t)
		for name := range openStrings {
			hasEnum, ok := props[name]
			require.True(t, ok, "%s is no longer in the spec: remove it from openStrings", name)
			require.False(t, hasEnum, "%s has an enum now: remove it from openStrings", name)
		}
	})
}

// runActionEnum is the enum of Run.action in the spec.
func runActionEnum(t *testing.T) []string {
	t.Helper()
	s := httpapi.Spec().Components.Schemas.Map()["Run"].Properties["action"]
	require.NotNil(t, s)
	var out []string
	for _, v := range s.Enum {
		out = append(out, v.(string))
	}
	require.NotEmpty(t, out)
	return out
}

func TestRunActions(t *testing.T) {
	t.Parallel()

	t.Run("EveryJobKindThatKeepsARunIsAnAction", func(t *testing.T) {
		t.Parallel()
		// Kinds that keep no run of their own, or are not served.
		noRun := map[string]string{
			"notify_deliver": "a delivery is a row of its own, not a run",
			"recover_runs":   "it finishes other runs and keeps none",
			"test_hold":      "a test action, left out of the served spec",
		}
		b, err := os.ReadFile(filepath.Join("..", "jobs", "testdata", "kinds.golden"))
		require.NoError(t, err)
		enum := runActionEnum(t)
		kinds := 0
		for line := range strings.Lines(string(b)) {
			fields := strings.Fields(line)
			if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
				continue
			}
			kinds++
			if _, ok := noRun[fields[0]]; ok {
				continue
			}
			require.Contains(t, enum, fields[0], "job kind %s keeps runs but is not in httpapi.RunActions", fields[0])
		}
		require.Greater(t, kinds, 15)
	})

	t.Run("EveryActionConstantIsAnAction", func(t *testing.T) {
		t.Parallel()
		// Every string constant named Action… or …Action in internal/ is
		// an action a run records.
		enum := runActionEnum(t)
		name := regexp.MustCompile(`^Action|Action$`)
		found := 0
		fset := token.NewFileSet()
		err := filepath.WalkDir(filepath.Join("..", "internal"), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "apiclient" {
				return filepath.SkipDir // the generated client's enum constants
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if !name.MatchString(id.Name) || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, err := strconv.Unquote(lit.Value)
						require.NoError(t, err)
						found++
						require.Contains(t, enum, v, "%s (%s) is not in httpapi.RunActions", id.Name, fset.Position(id.Pos()))
					}
				}
			}
			return nil
		})
		require.NoError(t, err)
		require.Greater(t, found, 40)
	})
}
