import { useState } from "preact/hooks";
import { api, type Schemas } from "./api.ts";
import { Action, Loading, Page, RunState, ToneBadge, useLoad, When } from "./ui.tsx";
import type { Tone } from "./api.ts";
import { allows } from "./session.ts";

type Infra = Schemas["Infrastructure"];

const statusTones: Record<Infra["status"], Tone> = { pending: "info", applied: "ok", failed: "error", stale: "warn", destroyed: "info" };

function LastRun(props: { label: string; run?: Schemas["Run"] | undefined }) {
  if (!props.run) return null;
  return (
    <div>
      {props.label}: <RunState state={props.run.state} /> <a href={`/journal/${props.run.id}`}>{props.run.id.slice(0, 8)}</a>{" "}
      <When at={props.run.finishedAt ?? props.run.requestedAt} />
    </div>
  );
}

// Destroy asks for the unit's name typed out before it sends anything.
function Destroy(props: { i: Infra }) {
  const [typed, setTyped] = useState("");
  const id = `destroy-${props.i.id}`;
  if (!allows("admin")) return null;
  return (
    <form class="reason-action" onSubmit={(e) => e.preventDefault()}>
      <label for={id}>Type {props.i.name} to destroy it</label>
      <input id={id} value={typed} autocomplete="off" onInput={(e) => setTyped((e.target as HTMLInputElement).value)} />
      <Action
        label={`Destroy ${props.i.name}`}
        need="admin"
        danger
        disabled={typed !== props.i.name}
        call={() => api.POST("/api/v1/infrastructures/{id}/destroy", { params: { path: { id: props.i.id } } })}
      />
    </form>
  );
}

export function Infrastructures() {
  const l = useLoad(() => api.GET("/api/v1/infrastructures"), []);
  return (
    <Page title="Infrastructure" sub="Terraform-backed units: the branch's intent against the last apply and the live state.">
      <Loading l={l}>
        {(d) =>
          d.infrastructures.length ? (
            <>
              {d.infrastructures.map((i) => {
                const path = { params: { path: { id: i.id } } };
                return (
                  <article class="card" key={i.id}>
                    <h2>{i.name}</h2>
                    <p>
                      <ToneBadge tone={statusTones[i.status]} text={i.status} />{" "}
                      {i.desiredAhead ? <ToneBadge tone="warn" text="desired ahead: the branch changed since the last apply" /> : null}{" "}
                      <code>{i.path}</code>
                    </p>
                    <LastRun label="Last plan" run={i.lastPlan} />
                    <LastRun label="Last apply" run={i.lastApply} />
                    <LastRun label="Last drift check" run={i.lastDriftCheck} />
                    {i.lastDriftCheck?.result !== undefined && i.lastDriftCheck.result !== null ? (
                      <details>
                        <summary>Drift report</summary>
                        <pre>{JSON.stringify(i.lastDriftCheck.result, null, 2)}</pre>
                      </details>
                    ) : null}
                    <div class="actions">
                      <Action label={`Plan ${i.name}`} call={() => api.POST("/api/v1/infrastructures/{id}/plan", path)} />
                      <Action label={`Apply ${i.name}`} call={() => api.POST("/api/v1/infrastructures/{id}/apply", path)} />
                      <Action label={`Drift check ${i.name}`} call={() => api.POST("/api/v1/infrastructures/{id}/drift-check", path)} />
                    </div>
                    <Destroy i={i} />
                  </article>
                );
              })}
            </>
          ) : (
            <p class="muted">No infrastructure units.</p>
          )
        }
      </Loading>
    </Page>
  );
}
