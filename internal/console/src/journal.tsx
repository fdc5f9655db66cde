import { useEffect, useRef, useState } from "preact/hooks";
import { api, problem, type Run } from "./api.ts";
import { navigate } from "./router.ts";
import { Page, Problem, RunState, When } from "./ui.tsx";

const states = ["", "queued", "running", "succeeded", "failed", "unknown", "cancelled"] as const;
type StateFilter = Exclude<(typeof states)[number], "">;

// Journal lists runs newest first; its filters live in the page's query
// string, so a filtered view can be bookmarked.
export function Journal(props: { query: URLSearchParams }) {
  const action = props.query.get("action") ?? "";
  const target = props.query.get("target") ?? "";
  const state = props.query.get("state") ?? "";
  const [runs, setRuns] = useState<Run[] | undefined>(undefined);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [err, setErr] = useState("");
  const [form, setForm] = useState({ action, target, state });
  // older is true once an older page is shown: the refresh then stops, so
  // that it does not take the pages away.
  const older = useRef(false);

  const load = async (after?: string) => {
    const query: { action?: string; target?: string; state?: StateFilter; limit: number; cursor?: string } = { limit: 50 };
    if (action) query.action = action;
    if (target) query.target = target;
    if (state) query.state = state as StateFilter;
    if (after) {
      query.cursor = after;
      older.current = true;
    }
    const r = await api.GET("/api/v1/journal", { params: { query } });
    if (r.error !== undefined) {
      setErr(problem(r.error, r.response.status));
      return;
    }
    setErr("");
    setRuns((prev) => (after ? [...(prev ?? []), ...r.data.runs] : r.data.runs));
    setCursor(r.data.nextCursor);
  };

  useEffect(() => {
    setForm({ action, target, state });
    setRuns(undefined);
    older.current = false;
    void load();
    const t = setInterval(() => {
      if (document.visibilityState === "visible" && !older.current) void load();
    }, 5000);
    return () => clearInterval(t);
  }, [action, target, state]);

  const apply = (e: Event) => {
    e.preventDefault();
    const q = new URLSearchParams();
    if (form.action.trim()) q.set("action", form.action.trim());
    if (form.target.trim()) q.set("target", form.target.trim());
    if (form.state) q.set("state", form.state);
    const s = q.toString();
    navigate(`/journal${s ? `?${s}` : ""}`);
  };

  return (
    <Page title="Journal" sub="Every action is a run with a receipt, newest first.">
      <form class="filters" onSubmit={apply}>
        <label>
          Action
          <input value={form.action} placeholder="converge" onInput={(e) => setForm({ ...form, action: (e.target as HTMLInputElement).value })} />
        </label>
        <label>
          Target
          <input value={form.target} placeholder="web" onInput={(e) => setForm({ ...form, target: (e.target as HTMLInputElement).value })} />
        </label>
        <label>
          State
          <select value={form.state} onChange={(e) => setForm({ ...form, state: (e.target as HTMLSelectElement).value })}>
            {states.map((s) => (
              <option value={s} key={s}>
                {s || "any"}
              </option>
            ))}
          </select>
        </label>
        <button type="submit">Filter</button>
      </form>
      <Problem text={err} />
      {runs === undefined ? (
        err ? null : <p class="muted">Loading…</p>
      ) : runs.length === 0 ? (
        <p class="muted">No runs match.</p>
      ) : (
        <div class="scroll">
          <table class="stack">
            <thead>
              <tr>
                <th scope="col">Requested</th>
                <th scope="col">Action</th>
                <th scope="col">Target</th>
                <th scope="col">State</th>
                <th scope="col">By</th>
                <th scope="col">Run</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((r) => (
                <tr key={r.id}>
                  <td data-label="Requested">
                    <When at={r.requestedAt} />
                  </td>
                  <td data-label="Action">{r.action}</td>
                  <td data-label="Target">{r.target}</td>
                  <td data-label="State">
                    <RunState state={r.state} />
                  </td>
                  <td data-label="By">{r.requestedBy}</td>
                  <td data-label="Run">
                    <a href={`/journal/${r.id}`}>
                      <code>{r.id.slice(0, 8)}</code>
                    </a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {cursor ? (
        <button type="button" onClick={() => void load(cursor)}>
          Older runs
        </button>
      ) : null}
    </Page>
  );
}
