package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"sluice/internal/hoststep"
	"sluice/internal/nodeproto"
	"sluice/internal/render"
)

// Execute takes one task's step on h, sending its events to ev, and says
// what it did as the task's result. secrets are the values the task's claim
// handed over, for the service an apply (or a reprobe that starts it
// again) runs.
func Execute(ctx context.Context, h *hoststep.Host, kind string, payload json.RawMessage, secrets map[string]nodeproto.Secret, ev hoststep.Events) *nodeproto.Result {
	res := &nodeproto.Result{}
	var (
		val any
		err error
	)
	switch kind {
	case nodeproto.KindApply:
		var req hoststep.ApplyRequest
		if err = json.Unmarshal(payload, &req); err == nil {
			if req.Secrets, err = secretValues(secrets); err == nil {
				val, err = h.Apply(ctx, ev, &res.Phases, req)
			}
		}
	case nodeproto.KindReprobe:
		var req hoststep.ApplyRequest
		if err = json.Unmarshal(payload, &req); err == nil {
			if req.Secrets, err = secretValues(secrets); err == nil {
				val, err = h.Reprobe(ctx, ev, &res.Phases, req)
			}
		}
	case nodeproto.KindStop:
		var req nodeproto.StopRequest
		switch err = json.Unmarshal(payload, &req); {
		case err == nil && req.Remove:
			err = h.Remove(ctx, ev, &res.Phases, req.Name)
		case err == nil:
			err = h.Stop(ctx, ev, &res.Phases, req.Name)
		}
	case nodeproto.KindDestroyData:
		var req hoststep.DestroyDataRequest
		if err = json.Unmarshal(payload, &req); err == nil {
			val, err = h.DestroyData(ctx, ev, &res.Phases, req)
		}
	case nodeproto.KindInspect:
		var req hoststep.InspectRequest
		if err = json.Unmarshal(payload, &req); err == nil {
			val, err = h.Inspect(ctx, req)
		}
	case nodeproto.KindUnitText:
		var req nodeproto.StopRequest
		if err = json.Unmarshal(payload, &req); err == nil {
			var text []byte
			text, err = h.UnitText(ctx, req.Name)
			val = nodeproto.UnitTextAnswer{Text: string(text), Missing: text == nil}
		}
	default:
		err = fmt.Errorf("this agent does not know the %q step; upgrade it", kind)
	}
	if err != nil {
		res.Error = strings.ReplaceAll(err.Error(), "\x00", "\uFFFD")
		return res
	}
	if val != nil {
		b, _ := json.Marshal(val)
		res.Value = scrubNUL(b)
	}
	return res
}

// secretValues turns the secrets a claim handed over into the values the
// host step matches with its unit's references.
func secretValues(secrets map[string]nodeproto.Secret) (map[string]hoststep.SecretValue, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	out := make(map[string]hoststep.SecretValue, len(secrets))
	for k, v := range secrets {
		ref, err := render.ParseSecretRef(v.Ref)
		if err != nil {
			return nil, fmt.Errorf("the control plane handed over variable %s's secret under a reference this agent does not read (%v); is it of another version?", k, err)
		}
		out[k] = hoststep.SecretValue{Ref: ref, Value: v.Value}
	}
	return out, nil
}

// scrubNUL replaces NULs in encoded JSON, which PostgreSQL cannot store,
// with U+FFFD: a host's output may hold anything.
func scrubNUL(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte(`\u0000`), []byte(`\ufffd`))
}
