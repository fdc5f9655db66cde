package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/phase"
	"sluice/internal/services"
)

func TestRunPayloads(t *testing.T) {
	t.Parallel()

	t.Run("EveryActionOnce", func(t *testing.T) {
		t.Parallel()
		require.Len(t, runPayloads, len(RunActions), "an action listed twice in runKinds")
		require.Equal(t, RunActions, actionsOf(runKinds))
	})

	t.Run("TheSpecTypesEachActionsParamsAndResult", func(t *testing.T) {
		t.Parallel()
		spec := Spec()
		schemas := spec.Components.Schemas.Map()
		run := schemas["Run"]
		require.Len(t, run.OneOf, len(RunActions))
		require.Equal(t, "action", run.Discriminator.PropertyName)
		deploy := schemas[refName(t, run.Discriminator.Mapping["deploy"])]
		require.Equal(t, []any{"deploy"}, deploy.Properties["action"].Enum)
		require.Equal(t, schemaPrefix+"ServicesDeployParams", deploy.Properties["params"].Ref)
		require.Equal(t, schemaPrefix+"ServicesResult", deploy.Properties["result"].Ref)
		require.Contains(t, schemas["ServicesResult"].Properties, "phases")
		cordon := schemas[refName(t, run.Discriminator.Mapping["cordon_node"])]
		require.NotContains(t, cordon.Properties, "params")
		require.NotContains(t, cordon.Properties, "result")
	})

	t.Run("EveryEventKindIsItsTypesKind", func(t *testing.T) {
		t.Parallel()
		told := map[string]bool{}
		for _, kind := range eventKindKeys {
			told[kind] = true
		}
		for kind, typ := range eventPayloads {
			f, ok := typ.FieldByName("Kind")
			require.True(t, ok, "%s has no Kind field", typ)
			require.Equal(t, "kind", f.Tag.Get("json"), "%s's Kind", typ)
			require.Equal(t, kind, f.Tag.Get("enum"), "%s's Kind enum", typ)
			require.True(t, told[kind], "eventKindKeys cannot tell %s from an event written without its kind", kind)
		}
		spec := Spec()
		data := spec.Components.Schemas.Map()["EventData"]
		require.Len(t, data.OneOf, len(eventPayloads))
		require.Equal(t, "kind", data.Discriminator.PropertyName)
	})

	t.Run("AnEventWrittenWithoutItsKindIsToldItByItsKeys", func(t *testing.T) {
		t.Parallel()
		got := withKind(json.RawMessage(`{"lines":["a","b"]}`))
		require.JSONEq(t, `{"kind":"output","lines":["a","b"]}`, string(got))
		got = withKind(json.RawMessage(`{"kind":"probe","probe":{}}`))
		require.JSONEq(t, `{"kind":"probe","probe":{}}`, string(got), "a kind stored is kept")
		got = withKind(json.RawMessage(`{"unheard":1}`))
		require.JSONEq(t, `{"unheard":1}`, string(got), "data of no known kind is served as stored, never dropped")
	})

	t.Run("PayloadTypesAreNamedByTheirPackage", func(t *testing.T) {
		t.Parallel()
		type local struct{}
		require.Equal(t, "HttpapiLocal", packageNamer(reflect.TypeFor[local](), ""))
		require.Equal(t, "String", packageNamer(reflect.TypeFor[string](), ""))
		require.Equal(t, "JournalPhase", packageNamer(reflect.TypeFor[phase.Phase](), ""), "phase's types are the journal's")
		require.Equal(t, "ServicesResult", packageNamer(reflect.TypeFor[*services.Result](), ""))
	})
}

func refName(t *testing.T, ref string) string {
	t.Helper()
	require.NotEmpty(t, ref)
	return ref[len(schemaPrefix):]
}
