import { useState } from "preact/hooks";
import { api } from "./api.ts";
import { Action, Digest, Loading, Page, RunState, StatusBlock, useLoad, When } from "./ui.tsx";
import { allows } from "./session.ts";

// bytes is a size for people: 1.2 MB.
function bytes(n: number): string {
  if (n < 1000) return `${n} B`;
  const units = ["kB", "MB", "GB"];
  let v = n / 1000;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

function svcPinned(s: { pinnedDigest?: string } | undefined): string | undefined {
  return s?.pinnedDigest;
}

export function Service(props: { name: string }) {
  const name = props.name;
  const path = { params: { path: { name } } };
  const svc = useLoad(() => api.GET("/api/v1/services/{name}", path), [name]);
  const st = useLoad(() => api.GET("/api/v1/services/{name}/status", path), [name]);
  const [digest, setDigest] = useState("");
  const [composeService, setComposeService] = useState("");
  const stored = useLoad(() => api.GET("/api/v1/artifacts", { params: { query: { limit: 50 } } }), [], 30000);
  return (
    <Page title={name} sub="Service">
      <Loading l={st}>
        {(s) => (
          <>
            <StatusBlock s={s}>
              {s.evidence.lastCheck ? (
                <>
                  <h3>Last drift check</h3>
                  <p>
                    {s.evidence.lastCheck.status} <When at={s.evidence.lastCheck.at} />{" "}
                    <a href={`/journal/${s.evidence.lastCheck.journalId}`}>run</a>
                  </p>
                  {s.evidence.lastCheck.drift.length ? (
                    <ul>
                      {s.evidence.lastCheck.drift.map((d) => (
                        <li key={d.class + d.fact}>
                          {d.class}: {d.fact} <span class="muted">({d.proof})</span>
                        </li>
                      ))}
                    </ul>
                  ) : null}
                </>
              ) : null}
            </StatusBlock>
          </>
        )}
      </Loading>
      <Loading l={svc}>
        {(v) => (
          <>
            <h2>Actions</h2>
            <div class="actions">
              <Action label="Converge" call={() => api.POST("/api/v1/services/{name}/converge", path)} />
              <Action label="Drift check" call={() => api.POST("/api/v1/services/{name}/drift-check", path)} />
              <Action
                label="Rollback"
                danger
                confirm={`Roll ${name} back to its previous healthy digest?`}
                call={() => api.POST("/api/v1/services/{name}/rollback", path)}
              />
              {v.paused ? <Action label="Resume" call={() => api.POST("/api/v1/services/{name}/resume", path)} /> : null}
              <Action
                label="Stop"
                danger
                confirm={`Stop ${name}'s process? sluice starts it again only on a converge, deploy or rollback.`}
                call={() => api.POST("/api/v1/services/{name}/stop", path)}
              />
            </div>
            {allows("operator") ? (
              <form class="reason-action" onSubmit={(e) => e.preventDefault()}>
                <label for="deploy-pick">Deploy a stored artifact</label>
                <select
                  id="deploy-pick"
                  value={stored.data?.artifacts.some((a) => a.digest === digest.trim()) ? digest.trim() : ""}
                  onChange={(e) => setDigest((e.target as HTMLSelectElement).value)}
                >
                  <option value="">{stored.data ? "pick one, newest first…" : "loading the stored artifacts…"}</option>
                  {stored.data?.artifacts.map((a) => (
                    <option key={a.digest} value={a.digest}>
                      {a.digest.slice(0, 19)}… · {bytes(a.size)} · {new Date(a.createdAt).toLocaleString()}
                      {a.digest === svcPinned(svc.data) ? " (pinned)" : ""}
                    </option>
                  ))}
                </select>
                <label for="deploy-digest" class="sr">
                  or its digest
                </label>
                <input
                  id="deploy-digest"
                  value={digest}
                  placeholder="sha256:…"
                  pattern="^sha256:[0-9a-f]{64}$"
                  onInput={(e) => setDigest((e.target as HTMLInputElement).value)}
                />
                {v.runtime === "compose" ? (
                  <>
                    <label for="deploy-compose-service">to the Compose service</label>
                    <input
                      id="deploy-compose-service"
                      value={composeService}
                      placeholder="web"
                      onInput={(e) => setComposeService((e.target as HTMLInputElement).value)}
                    />
                  </>
                ) : null}
                <Action
                  label="Deploy"
                  disabled={!/^sha256:[0-9a-f]{64}$/.test(digest.trim()) || (v.runtime === "compose" && !composeService.trim())}
                  call={() =>
                    api.POST("/api/v1/services/{name}/deploy", {
                      ...path,
                      body:
                        v.runtime === "compose"
                          ? { digest: digest.trim(), composeService: composeService.trim() }
                          : { digest: digest.trim() },
                    })
                  }
                />
              </form>
            ) : null}
            <h2>Digests</h2>
            <dl class="facts">
              <dt>Pinned</dt>
              <dd>
                <Digest d={v.pinnedDigest} />
              </dd>
              <dt>Running</dt>
              <dd>
                <Digest d={v.runningDigest} />
              </dd>
              <dt>Previous healthy</dt>
              <dd>
                <Digest d={v.previousHealthyDigest} />
              </dd>
              <dt>Process</dt>
              <dd>
                {v.process.running ? `running, pid ${v.process.pid ?? "?"}` : `not running${v.process.lastExit ? ` (${v.process.lastExit})` : ""}`}
              </dd>
              <dt>Runtime</dt>
              <dd>{v.runtime}</dd>
              <dt>Unit</dt>
              <dd>
                <code>{v.path}</code> ({v.status}){v.desiredAhead ? ", the branch is ahead of what runs" : ""}
              </dd>
              {v.paused ? (
                <>
                  <dt>Paused</dt>
                  <dd>
                    by {v.pausedBy ?? "?"} <When at={v.pausedAt} />: {v.pauseReason ?? ""}
                  </dd>
                </>
              ) : null}
            </dl>
            <h2>Queue</h2>
            {v.queued.length ? (
              <ul>
                {v.queued.map((r) => (
                  <li key={r.id}>
                    <RunState state={r.state} /> {r.action} <a href={`/journal/${r.id}`}>{r.id.slice(0, 8)}</a>
                  </li>
                ))}
              </ul>
            ) : (
              <p class="muted">Nothing queued.</p>
            )}
            {v.lastRun ? (
              <p>
                Last run: <RunState state={v.lastRun.state} /> {v.lastRun.action}{" "}
                <a href={`/journal/${v.lastRun.id}`}>{v.lastRun.id.slice(0, 8)}</a> <When at={v.lastRun.requestedAt} />
              </p>
            ) : null}
          </>
        )}
      </Loading>
    </Page>
  );
}
