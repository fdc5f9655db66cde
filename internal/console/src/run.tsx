import { useEffect, useState } from "preact/hooks";
import { api, finalStates, type Run as RunT } from "./api.ts";
import { takeFlash } from "./router.ts";
import { followRun, type RunEvent } from "./sse.ts";
import { Action, Digest, Loading, Page, RunState, ToneBadge, useLoad, When } from "./ui.tsx";

// Run shows one run: its events, live while it runs, and its receipt.
export function Run(props: { id: string }) {
  const id = props.id;
  const [note] = useState(takeFlash);
  const [events, setEvents] = useState<RunEvent[]>([]);
  const [ended, setEnded] = useState<RunT | undefined>(undefined);
  const [stream, setStream] = useState<{ s: string; detail?: string | undefined }>({ s: "connecting" });
  const l = useLoad(() => api.GET("/api/v1/journal/{id}", { params: { path: { id } } }), [id], 0);

  useEffect(() => {
    setEvents([]);
    setEnded(undefined);
    const ac = new AbortController();
    void followRun(
      id,
      {
        event: (e) => setEvents((prev) => (prev.some((p) => p.seq === e.seq) ? prev : [...prev, e])),
        end: (r) => setEnded(r),
        status: (s, detail) => setStream({ s, detail }),
      },
      ac.signal,
    );
    return () => ac.abort();
  }, [id]);

  const run = ended ?? l.data;
  return (
    <Page title={`Run ${id.slice(0, 8)}`} sub={run ? `${run.action} on ${run.target}` : undefined}>
      {note ? (
        <p class="note" role="status">
          {note}
        </p>
      ) : null}
      <Loading l={l}>
        {() =>
          run ? (
            <>
              <p class="run-state">
                <RunState state={run.state} />{" "}
                <span class="muted" role="status" data-stream={stream.s}>
                  {stream.s === "live" ? "following live" : stream.s === "done" ? "stream ended" : stream.s}
                  {stream.detail ? `: ${stream.detail}` : ""}
                </span>
              </p>
              {finalStates.includes(run.state) ? null : (
                <div class="actions">
                  <Action
                    label="Cancel run"
                    danger
                    confirm={`Cancel run ${run.id}? A queued run never starts; a running one is asked to stop.`}
                    call={() => api.POST("/api/v1/journal/{id}/cancel", { params: { path: { id } }, body: { reason: "cancelled from the console" } })}
                  />
                </div>
              )}
              <h2>Events ({events.length})</h2>
              {events.length ? (
                <ol class="events" aria-live="polite">
                  {events.map((e) => (
                    <li key={e.seq} class={`event event-${e.level}`} data-seq={e.seq}>
                      <span class="seq">{e.seq}</span>
                      <time dateTime={e.at}>{new Date(e.at).toLocaleTimeString()}</time>
                      {e.level !== "info" ? <ToneBadge tone={e.level === "warn" ? "warn" : "error"} text={e.level} /> : null}
                      <span class="msg">{e.message}</span>
                    </li>
                  ))}
                </ol>
              ) : (
                <p class="muted">No events yet.</p>
              )}
              <h2>Receipt</h2>
              {finalStates.includes(run.state) ? null : <p class="muted">The run is not finished: the receipt fills in when it ends.</p>}
              <dl class="facts receipt">
                <dt>Id</dt>
                <dd>
                  <code>{run.id}</code>
                </dd>
                <dt>State</dt>
                <dd>
                  <RunState state={run.state} />
                </dd>
                <dt>Action</dt>
                <dd>
                  {run.action} on {run.target}
                </dd>
                <dt>Requested</dt>
                <dd>
                  by {run.requestedBy} <When at={run.requestedAt} />
                  {run.joined > 0 ? ` · joined by ${run.joined} more click${run.joined === 1 ? "" : "s"}` : ""}
                </dd>
                <dt>Started</dt>
                <dd>
                  <When at={run.startedAt} />
                </dd>
                <dt>Finished</dt>
                <dd>
                  <When at={run.finishedAt} />
                </dd>
                {run.error ? (
                  <>
                    <dt>Error</dt>
                    <dd class="problem">{run.error}</dd>
                  </>
                ) : null}
                {run.digestFrom || run.digestTo ? (
                  <>
                    <dt>Digest</dt>
                    <dd>
                      <Digest d={run.digestFrom} /> → <Digest d={run.digestTo} />
                    </dd>
                  </>
                ) : null}
                {run.commit ? (
                  <>
                    <dt>Commit</dt>
                    <dd>
                      <code>{run.commit}</code>
                    </dd>
                  </>
                ) : null}
                <dt>Attempt</dt>
                <dd>
                  {run.attempt}
                  {run.retryOf ? (
                    <>
                      {" "}
                      · retry of <a href={`/journal/${run.retryOf}`}>{run.retryOf.slice(0, 8)}</a>
                    </>
                  ) : null}
                </dd>
                {run.eventsLost > 0 ? (
                  <>
                    <dt>Events lost</dt>
                    <dd>{run.eventsLost}</dd>
                  </>
                ) : null}
                {run.result !== undefined && run.result !== null ? (
                  <>
                    <dt>Result</dt>
                    <dd>
                      <pre>{JSON.stringify(run.result, null, 2)}</pre>
                    </dd>
                  </>
                ) : null}
                {run.riverJobId !== undefined ? (
                  <>
                    <dt>River job</dt>
                    <dd>
                      <a href={`/riverui/jobs/${run.riverJobId}`} data-external target="_blank" rel="noopener">
                        {run.riverJobId} in River UI
                      </a>{" "}
                      <span class="muted">(asks for the token as the password)</span>
                    </dd>
                  </>
                ) : null}
              </dl>
            </>
          ) : null
        }
      </Loading>
    </Page>
  );
}
