package supervise

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// A Spec's JSON form (spec.json, and what Hash hashes) keeps every byte of
// its strings: JSON strings hold UTF-8 only, and encoding/json writes each
// invalid byte as U+FFFD, so a string that is not UTF-8 (an argument or an
// environment value in Latin-1, or a secret's raw bytes) is written as
// {"base64": "..."} instead, and read back as it was.

// wireString is a string that encodes losslessly.
type wireString string

func (s wireString) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(s)) {
		return json.Marshal(string(s))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString([]byte(s))})
}

func (s *wireString) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		var raw struct {
			Base64 []byte `json:"base64"`
		}
		if err := json.Unmarshal(t, &raw); err != nil {
			return err
		}
		*s = wireString(raw.Base64)
		return nil
	}
	var plain string
	if err := json.Unmarshal(b, &plain); err != nil {
		return err
	}
	*s = wireString(plain)
	return nil
}

type wireSpec struct {
	Exec        wireString            `json:"exec"`
	Args        []wireString          `json:"args,omitempty"`
	Env         map[string]wireString `json:"env,omitempty"`
	WorkDir     wireString            `json:"workDir,omitempty"`
	StopTimeout time.Duration         `json:"stopTimeout,omitempty"`
}

// MarshalJSON writes the spec without losing a byte (see wireString).
func (s Spec) MarshalJSON() ([]byte, error) {
	w := wireSpec{Exec: wireString(s.Exec), WorkDir: wireString(s.WorkDir), StopTimeout: s.StopTimeout}
	for _, a := range s.Args {
		w.Args = append(w.Args, wireString(a))
	}
	if s.Env != nil {
		w.Env = make(map[string]wireString, len(s.Env))
		for k, v := range s.Env {
			w.Env[k] = wireString(v)
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON wrote, and a spec written before it
// (plain strings only).
func (s *Spec) UnmarshalJSON(b []byte) error {
	var w wireSpec
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Spec{Exec: string(w.Exec), WorkDir: string(w.WorkDir), StopTimeout: w.StopTimeout}
	for _, a := range w.Args {
		s.Args = append(s.Args, string(a))
	}
	if w.Env != nil {
		s.Env = make(map[string]string, len(w.Env))
		for k, v := range w.Env {
			s.Env[k] = string(v)
		}
	}
	return nil
}
