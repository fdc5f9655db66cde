// Pieces every page uses: tones shown by icon, word and colour (never by
// colour alone), loading, the answer block and action buttons that answer
// with their run.
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { problem, type Run, type Schemas, type Tone } from "./api.ts";
import { navigate } from "./router.ts";
import { allows, type Role } from "./session.ts";

const icons: Record<Tone, string> = { ok: "✓", info: "ℹ", warn: "⚠", error: "✕" };

export function ToneBadge(props: { tone: Tone; text?: string | undefined }) {
  return (
    <span class={`tone tone-${props.tone}`}>
      <span aria-hidden="true">{icons[props.tone]}</span> <span class="sr">{props.tone}: </span>
      {props.text ?? props.tone}
    </span>
  );
}

export function runTone(state: Run["state"]): Tone {
  switch (state) {
    case "succeeded":
      return "ok";
    case "failed":
      return "error";
    case "unknown":
      return "warn";
    default:
      return "info";
  }
}

export function RunState(props: { state: Run["state"] }) {
  return <ToneBadge tone={runTone(props.state)} text={props.state} />;
}

export function When(props: { at?: string | undefined }) {
  if (!props.at) return <span class="muted">never</span>;
  const d = new Date(props.at);
  return (
    <time dateTime={props.at} title={props.at}>
      {d.toLocaleString()} <span class="muted">({ago(d)})</span>
    </time>
  );
}

export function ago(d: Date): string {
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 0) return "in the future";
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function Digest(props: { d?: string | undefined }) {
  if (!props.d) return <span class="muted">none</span>;
  return <code title={props.d}>{props.d.length > 19 ? props.d.slice(0, 19) + "…" : props.d}</code>;
}

export interface Loaded<T> {
  data: T | undefined;
  error: string;
  reload: () => void;
}

// useLoad runs load now, again when deps change, and every refreshMs while the
// page is open (0: never), keeping the last good data on a failed refresh.
export function useLoad<T>(
  load: () => Promise<{ data?: T; error?: unknown; response: Response }>,
  deps: unknown[],
  refreshMs = 5000,
): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState("");
  const gen = useRef(0);
  const run = useCallback(() => {
    const mine = ++gen.current;
    load().then(
      (r) => {
        if (mine !== gen.current) return;
        if (r.error !== undefined || !r.response.ok) setError(problem(r.error, r.response.status));
        else {
          setError("");
          setData(r.data);
        }
      },
      (e: unknown) => {
        if (mine === gen.current) setError(problem(e));
      },
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  useEffect(() => {
    setData(undefined);
    run();
    if (!refreshMs) return;
    const t = setInterval(() => {
      if (document.visibilityState === "visible") run();
    }, refreshMs);
    return () => clearInterval(t);
  }, [run]);
  return { data, error, reload: run };
}

export function Page(props: { title: string; sub?: ComponentChildren; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${props.title} · sluice`;
  }, [props.title]);
  return (
    <section>
      <h1 tabIndex={-1} id="page-title">
        {props.title}
      </h1>
      {props.sub ? <p class="sub">{props.sub}</p> : null}
      {props.children}
    </section>
  );
}

export function Problem(props: { text: string }) {
  if (!props.text) return null;
  return (
    <p class="problem" role="alert">
      <span aria-hidden="true">✕</span> {props.text}
    </p>
  );
}

export function Loading<T>(props: { l: Loaded<T>; children: (d: T) => ComponentChildren }) {
  if (props.l.data === undefined) {
    return props.l.error ? <Problem text={props.l.error} /> : <p class="muted" aria-busy="true">Loading…</p>;
  }
  return (
    <>
      <Problem text={props.l.error} />
      {props.children(props.l.data)}
    </>
  );
}

// StatusAnswer is the answer of any kind: they differ only in the states
// their schemas list.
type StatusAnswer = Schemas["StatusAnswerServiceState"] | Schemas["StatusAnswerSourceState"] | Schemas["StatusAnswerBlueprintState"];

// StatusBlock is a status in the shared shape, the one way every kind's
// status shows: its qualifications on top (lines that say which part to
// trust less), the answer block (one toned state, the reason that needs an
// operator first, a count of the others and "partial" when evidence is
// missing), the path stage by stage, and the evidence folded: the grants,
// the settled stages, what is in progress and what is not proven. children
// are what the kind adds to its evidence (a service's last drift check).
export function StatusBlock(props: {
  s: { answer: StatusAnswer; path: Schemas["StatusStage"][]; evidence: Schemas["StatusEvidence"] };
  children?: ComponentChildren;
}) {
  const a = props.s.answer;
  const ev = props.s.evidence;
  return (
    <>
      {a.qualifications.length ? (
        <ul class="qualifications" aria-label="Qualifications">
          {a.qualifications.map((q) => (
            <li key={q}>{q}</li>
          ))}
        </ul>
      ) : null}
      <div class={`answer answer-${a.tone}`}>
        <div class="answer-head">
          <ToneBadge tone={a.tone} text={a.state} />
          <span class="muted"> at {a.stage}</span>
          {a.others > 0 ? <span class="pill">+{a.others} other{a.others === 1 ? "" : "s"}</span> : null}
          {a.partial ? (
            <span class="pill" title="Some evidence is missing: the answer may be incomplete.">partial</span>
          ) : null}
        </div>
        <p>{a.reason}</p>
        {a.action ? (
          <p class="next">
            <strong>Next:</strong> {a.action}
          </p>
        ) : null}
      </div>
      <ol class="path" aria-label="Path">
        {props.s.path.map((st) => (
          <li class={`stage stage-${st.tone}`} key={st.stage}>
            <span class="stage-name">{st.stage}</span>
            <ToneBadge tone={st.tone} text={st.state} />
            {st.reason ? <span class="stage-reason">{st.reason}</span> : null}
          </li>
        ))}
      </ol>
      <details class="evidence">
        <summary>Evidence</summary>
        <h3>Grants</h3>
        {ev.grants.length ? (
          <ul>
            {ev.grants.map((g) => (
              <li key={g.journalId + g.what}>
                {g.what}
                {g.subject ? ` (${g.subject})` : ""} by {g.by} under {g.policy} <When at={g.at} />{" "}
                {g.commit && !g.subject ? <code>{g.commit.slice(0, 12)}</code> : null} {g.digest ? <Digest d={g.digest} /> : null}{" "}
                <a href={`/journal/${g.journalId}`}>run</a>
              </li>
            ))}
          </ul>
        ) : (
          <p class="muted">none</p>
        )}
        <h3>Settled</h3>
        {ev.settled.length ? (
          <ul>
            {ev.settled.map((x) => (
              <li key={x.stage}>
                {x.stage}: {x.state} — {x.proof}
              </li>
            ))}
          </ul>
        ) : (
          <p class="muted">none</p>
        )}
        {ev.inProgress.length ? (
          <>
            <h3>In progress</h3>
            <ul>{ev.inProgress.map((x) => <li key={x}>{x}</li>)}</ul>
          </>
        ) : null}
        <h3>Not proven</h3>
        {ev.unproven.length ? <ul>{ev.unproven.map((x) => <li key={x}>{x}</li>)}</ul> : <p class="muted">nothing</p>}
        {props.children}
      </details>
    </>
  );
}

type ActionResult = { data?: unknown; error?: unknown; response: Response };

// accepted reads the run out of an action's answer: journalId, and whether
// the click joined a run already queued or running (joined, or existing for
// a rollout already authorized).
function accepted(data: unknown): { id: string; joined: boolean } | null {
  if (!data || typeof data !== "object") return null;
  const d = data as { journalId?: unknown; joined?: unknown; existing?: unknown };
  if (typeof d.journalId !== "string" || !d.journalId) return null;
  return { id: d.journalId, joined: d.joined === true || d.existing === true };
}

// Action is a button that calls the API, then opens the run it answers with
// and follows it there. An error answer (403 for a role that may not, 409 for
// a conflict) is shown beside the button as the API's sentence.
//
// need is the role the operation needs (operator unless said): a token
// whose role does not reach it sees no button. The API refuses it anyway.
export function Action(props: {
  label: string;
  call: () => Promise<ActionResult>;
  need?: Role;
  danger?: boolean;
  confirm?: string;
  disabled?: boolean;
  // why says why the action is disabled, beside it.
  why?: string | undefined;
  onDone?: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [ok, setOk] = useState("");
  const click = async () => {
    if (props.confirm && !window.confirm(props.confirm)) return;
    setBusy(true);
    setErr("");
    setOk("");
    try {
      const r = await props.call();
      if (r.error !== undefined || !r.response.ok) {
        setErr(problem(r.error, r.response.status));
        return;
      }
      const a = accepted(r.data);
      if (a) {
        navigate(`/journal/${a.id}`, a.joined ? `Joined run ${a.id}: the same action was already queued or running.` : `${props.label}: started run ${a.id}.`);
        return;
      }
      setOk("Done.");
      props.onDone?.();
    } catch (e) {
      setErr(problem(e));
    } finally {
      setBusy(false);
    }
  };
  if (!allows(props.need ?? "operator")) return null;
  return (
    <span class="action">
      <button type="button" class={props.danger ? "danger" : ""} disabled={busy || props.disabled} title={props.disabled ? props.why : undefined} onClick={click}>
        {busy ? `${props.label}…` : props.label}
      </button>
      {props.disabled && props.why ? <span class="muted inline">{props.why}</span> : null}
      {err ? (
        <span class="problem inline" role="alert">
          {err}
        </span>
      ) : null}
      {ok ? (
        <span class="muted inline" role="status">
          {ok}
        </span>
      ) : null}
    </span>
  );
}

// ReasonAction is an action that needs a reason first (Pause).
export function ReasonAction(props: {
  label: string;
  call: (reason: string) => Promise<ActionResult>;
  placeholder: string;
  // disabled, with why, when the action can do nothing now.
  disabled?: boolean;
  why?: string | undefined;
}) {
  const [reason, setReason] = useState("");
  const id = `reason-${props.label.replace(/\W+/g, "-").toLowerCase()}`;
  if (!allows("operator")) return null;
  return (
    <form
      class="reason-action"
      onSubmit={(e) => {
        e.preventDefault();
      }}
    >
      <label for={id}>Reason</label>
      <input
        id={id}
        value={reason}
        required
        maxLength={500}
        placeholder={props.placeholder}
        onInput={(e) => setReason((e.target as HTMLInputElement).value)}
      />
      <Action
        label={props.label}
        disabled={props.disabled || reason.trim() === ""}
        why={props.disabled ? props.why : undefined}
        call={() => props.call(reason.trim())}
      />
    </form>
  );
}

export function Labels(props: { labels: Record<string, string> | undefined }) {
  const entries = Object.entries(props.labels ?? {});
  if (!entries.length) return <span class="muted">none</span>;
  return (
    <ul class="labels">
      {entries.map(([k, v]) => (
        <li key={k}>
          <code>
            {k}={v}
          </code>
        </li>
      ))}
    </ul>
  );
}

export function List(props: { items: string[]; empty?: string }) {
  if (!props.items.length) return <span class="muted">{props.empty ?? "none"}</span>;
  return <span>{props.items.join(", ")}</span>;
}
