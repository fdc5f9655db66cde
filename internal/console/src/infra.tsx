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

// drift is the part of a drift check's result the report shows (the
// result is free-form JSON in the spec; see infra.Drift).
type drift = {
  status?: string;
  desiredAhead?: boolean;
  liveDrift?: boolean;
  reason?: string;
  summary?: { add?: number; change?: number; destroy?: number };
  addresses?: string[];
  excerpt?: string;
  checkedAt?: string;
};

const driftTones: Record<string, Tone> = { in_sync: "ok", desired_ahead: "warn", live_drift: "error", unknown: "warn" };

// DriftReport shows the last drift check's two signals apart: desired
// ahead (the branch changed since the last apply) and live drift (the real
// state differs from the last apply), with what the plan would change.
function DriftReport(props: { result: unknown }) {
  const r = props.result;
  if (!r || typeof r !== "object") return null;
  const d = r as drift;
  if (typeof d.status !== "string") return null;
  const yes = (v: boolean | undefined) => (v === undefined ? "not known" : v ? "yes" : "no");
  return (
    <section class="drift-report" aria-label="Drift report">
      <h3>
        Drift report: <ToneBadge tone={driftTones[d.status] ?? "warn"} text={d.status} />
      </h3>
      <dl class="facts">
        <dt>Desired ahead</dt>
        <dd>{yes(d.desiredAhead)}: the branch holds content other than the last apply's</dd>
        <dt>Live drift</dt>
        <dd>{yes(d.liveDrift)}: the real state differs from what the last apply left</dd>
        {d.reason ? (
          <>
            <dt>Why unknown</dt>
            <dd>{d.reason}</dd>
          </>
        ) : null}
        {d.summary ? (
          <>
            <dt>The plan would</dt>
            <dd>
              add {d.summary.add ?? 0}, change {d.summary.change ?? 0}, destroy {d.summary.destroy ?? 0}
            </dd>
          </>
        ) : null}
        {d.checkedAt ? (
          <>
            <dt>Checked</dt>
            <dd>
              <When at={d.checkedAt} />
            </dd>
          </>
        ) : null}
      </dl>
      {d.addresses?.length ? (
        <ul class="addresses">
          {d.addresses.map((a) => (
            <li key={a}>
              <code>{a}</code>
            </li>
          ))}
        </ul>
      ) : null}
      {d.excerpt ? (
        <details>
          <summary>Plan excerpt</summary>
          <pre>{d.excerpt}</pre>
        </details>
      ) : null}
    </section>
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
                    <DriftReport result={i.lastDriftCheck?.result} />
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
