package unit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSetString(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		in    string
		path  []string
		value string
		want  string
	}{
		{
			"ReplacesANestedValue",
			`{"kind":"Service","spec":{"image":"web:1","port":80}}`,
			[]string{"spec", "image"}, "web:2",
			`{"kind":"Service","spec":{"image":"web:2","port":80}}`,
		},
		{
			"KeepsIndentationKeyOrderAndTrailingNewline",
			"{\n  \"spec\": {\n    \"port\": 80,\n    \"image\":   \"web:1\"\n  },\n  \"kind\": \"Service\"\n}\n",
			[]string{"spec", "image"}, "web:2",
			"{\n  \"spec\": {\n    \"port\": 80,\n    \"image\":   \"web:2\"\n  },\n  \"kind\": \"Service\"\n}\n",
		},
		{
			"KeepsCRLFLineEndings",
			"{\r\n\t\"spec\" :\r\n\t{\r\n\t\t\"image\"\t:\r\n \"web:1\"\r\n\t}\r\n}\r\n",
			[]string{"spec", "image"}, "web:2",
			"{\r\n\t\"spec\" :\r\n\t{\r\n\t\t\"image\"\t:\r\n \"web:2\"\r\n\t}\r\n}\r\n",
		},
		{
			"KeepsAMissingTrailingNewline",
			"{\n  \"image\": \"web:1\"\n}",
			[]string{"image"}, "web:2",
			"{\n  \"image\": \"web:2\"\n}",
		},
		{
			"IgnoresTheSameKeyInArraysAndDeeperObjects",
			`{"image":"top","spec":{"sidecars":[{"image":"side"},["image",{"spec":{"image":"x"}}]],` +
				`"inner":{"image":"deep","spec":{"image":"deeper"}},"image":"web:1"},"list":[{"spec":{"image":"y"}}]}`,
			[]string{"spec", "image"}, "web:2",
			`{"image":"top","spec":{"sidecars":[{"image":"side"},["image",{"spec":{"image":"x"}}]],` +
				`"inner":{"image":"deep","spec":{"image":"deeper"}},"image":"web:2"},"list":[{"spec":{"image":"y"}}]}`,
		},
		{
			"FindsATopLevelKeyAfterNestedOnesOfTheSameName",
			`{"spec":{"image":"inner"},"list":[{"image":"a"}],"image":"web:1"}`,
			[]string{"image"}, "web:2",
			`{"spec":{"image":"inner"},"list":[{"image":"a"}],"image":"web:2"}`,
		},
		{
			"KeepsTheEscapesOfOtherValues",
			`{"a":"\u002f\"x\\","spec":{"b":"\ud83d\ude00\t","image":"web:1","c":"\/"},"d":"<&>"}`,
			[]string{"spec", "image"}, "web:2",
			`{"a":"\u002f\"x\\","spec":{"b":"\ud83d\ude00\t","image":"web:2","c":"\/"},"d":"<&>"}`,
		},
		{
			"ReplacesAnEscapedValueWhole",
			`{"image":"reg\u002fweb:\"1\"\\","next":"x"}`,
			[]string{"image"}, "web:2",
			`{"image":"web:2","next":"x"}`,
		},
		{
			"MatchesAnEscapedKey",
			`{"im\u0061ge":"web:1"}`,
			[]string{"image"}, "web:2",
			`{"im\u0061ge":"web:2"}`,
		},
		{
			"ReplacesAnEmptyString",
			`{"image":""}`,
			[]string{"image"}, "web:2",
			`{"image":"web:2"}`,
		},
		{
			"WritesHTMLCharactersLiterallyAndEscapesWhatJSONRequires",
			`{"image":"web:1"}`,
			[]string{"image"}, "<a&b> \"q\" \\ \n é 😀",
			`{"image":"<a&b> \"q\" \\ \n é 😀"}`,
		},
		{
			"AcceptsAnEmptyKey",
			`{"":{"":"old"}}`,
			[]string{"", ""}, "new",
			`{"":{"":"new"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := []byte(tt.in)
			out, err := SetString(in, tt.path, tt.value)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(out))
			require.Equal(t, tt.in, string(in), "the input must not be modified")

			got, err := GetString(out, tt.path)
			require.NoError(t, err)
			require.Equal(t, tt.value, got)
		})
	}
}

func TestGetString(t *testing.T) {
	t.Parallel()

	got, err := GetString([]byte(`{"spec":{"image":"reg\u002fweb:\"1\"","list":[{"image":"no"}]}}`), []string{"spec", "image"})
	require.NoError(t, err)
	require.Equal(t, `reg/web:"1"`, got)

	tests := []struct {
		name    string
		in      string
		path    []string
		wantErr string
	}{
		{"MissingKey", `{"spec":{"port":80}}`, []string{"spec", "image"}, `cannot find "spec.image": the document has no such key`},
		{"MissingParent", `{"kind":"Service"}`, []string{"spec", "image"}, `cannot find "spec.image": the document has no such key`},
		{"OnlyInAnArray", `{"spec":[{"image":"x"}]}`, []string{"spec", "image"}, `cannot find "spec.image": "spec" holds an array, not an object`},
		{"OnlyDeeper", `{"spec":{"inner":{"image":"x"}}}`, []string{"spec", "image"}, `cannot find "spec.image": the document has no such key`},
		{"ParentIsAString", `{"spec":"x"}`, []string{"spec", "image"}, `cannot find "spec.image": "spec" holds a string, not an object`},
		{"Number", `{"spec":{"image":1.0}}`, []string{"spec", "image"}, `"spec.image" holds a number, not a string`},
		{"Null", `{"image":null}`, []string{"image"}, `"image" holds null, not a string`},
		{"Boolean", `{"image":true}`, []string{"image"}, `"image" holds a boolean, not a string`},
		{"Object", `{"image":{"name":"x"}}`, []string{"image"}, `"image" holds an object, not a string`},
		{"Array", `{"image":["x"]}`, []string{"image"}, `"image" holds an array, not a string`},
		{"DuplicateKey", `{"spec":{"image":"a","image":"b"}}`, []string{"spec", "image"}, `"spec.image" is ambiguous: the key "image" appears twice in the same object; keep only one`},
		{"DuplicateParent", `{"spec":{"image":"a"},"spec":{"port":1}}`, []string{"spec", "image"}, `"spec.image" is ambiguous: the key "spec" appears twice in the same object`},
		{"DuplicateOfANonString", `{"image":"a","x":[1],"image":3}`, []string{"image"}, `"image" is ambiguous`},
		{"NotJSON", `{"image":"a",}`, []string{"image"}, `cannot find "image": the document is not valid JSON: invalid character '}'`},
		{"Truncated", `{"image":"a"`, []string{"image"}, `cannot find "image": the document is not valid JSON: it ends before the value is complete`},
		{"TwoValues", `{"image":"a"} {}`, []string{"image"}, `cannot find "image": the document has more data after the JSON value`},
		{"Empty", ``, []string{"image"}, `cannot find "image": the document is not valid JSON`},
		{"TopLevelArray", `[{"image":"a"}]`, []string{"image"}, `cannot find "image": the document is an array, not an object`},
		{"TopLevelString", `"image"`, []string{"image"}, `cannot find "image": the document is a string, not an object`},
		{"EmptyPath", `{"image":"a"}`, nil, `the path is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := GetString([]byte(tt.in), tt.path)
			require.ErrorContains(t, err, tt.wantErr)
			_, setErr := SetString([]byte(tt.in), tt.path, "new")
			require.EqualError(t, setErr, err.Error(), "SetString and GetString refuse the same documents")
		})
	}
}

func FuzzSetString(f *testing.F) {
	for _, seed := range []struct{ data, path, value string }{
		{`{"spec":{"image":"web:1"}}`, "spec.image", "web:2"},
		{"{\r\n \"spec\" : { \"image\" :\t\"a\\u002fb\" }\r\n}\r\n", "spec.image", "<&>"},
		{`{"image":"top","spec":{"list":[{"image":"x"}],"image":"y"}}`, "spec.image", "\"q\"\\"},
		{`{"spec":{"image":"a","image":"b"}}`, "spec.image", "x"},
		{`{"spec":{"image":1}}`, "spec.image", "x"},
		{`{"a":{"b":{"c":"\ud83d\ude00"}},"d":[]}`, "a.b.c", "\u2028\x00"},
		{`{"im\u0061ge":"x"}`, "image", "\xff"},
		{`[{"image":"x"}]`, "image", "y"},
		{`{"":""}`, "", "y"},
	} {
		f.Add([]byte(seed.data), seed.path, seed.value)
	}
	f.Fuzz(func(t *testing.T, data []byte, rawPath, value string) {
		path := strings.Split(rawPath, ".")
		orig := string(data)
		out, err := SetString(data, path, value)
		require.Equal(t, orig, string(data), "the input must not be modified")
		old, getErr := GetString(data, path)
		if err != nil {
			require.EqualError(t, getErr, err.Error())
			return
		}
		require.NoError(t, getErr)

		require.True(t, json.Valid(out), "the result is not JSON: %q", out)
		got, err := GetString(out, path)
		require.NoError(t, err)
		require.Equal(t, roundTrip(t, value), got)

		// Only the value's own text changed: the bytes before and after it
		// are the input's, and the text replaced decodes to the old value.
		loc, err := locate(data, path)
		require.NoError(t, err)
		require.Equal(t, data[:loc.start], out[:loc.start])
		suffix := data[loc.end:]
		require.GreaterOrEqual(t, len(out), len(suffix))
		require.Equal(t, suffix, out[len(out)-len(suffix):])
		var decoded string
		require.NoError(t, json.Unmarshal(data[loc.start:loc.end], &decoded))
		require.Equal(t, old, decoded)
		enc, err := encodeString(value)
		require.NoError(t, err)
		require.Equal(t, string(enc), string(out[loc.start:len(out)-len(suffix)]))
	})
}

// roundTrip is what a JSON reader gets back for s once it is written: s
// with invalid UTF-8 replaced.
func roundTrip(t *testing.T, s string) string {
	t.Helper()
	data, err := json.Marshal(s)
	require.NoError(t, err)
	var out string
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}
