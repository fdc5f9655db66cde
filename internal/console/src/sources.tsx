import { api } from "./api.ts";
import { Action, List, Loading, Page, StatusBlock, ToneBadge, useLoad, When } from "./ui.tsx";

export function Sources() {
  const l = useLoad(() => api.GET("/api/v1/sources"), []);
  return (
    <Page title="Sources" sub="The Git repositories sluice syncs, each with its policy.">
      <Loading l={l}>
        {(d) =>
          d.sources.length ? (
            <div class="scroll">
              <table class="stack">
                <thead>
                  <tr>
                    <th scope="col">Source</th>
                    <th scope="col">Repository</th>
                    <th scope="col">Policy</th>
                    <th scope="col">State</th>
                  </tr>
                </thead>
                <tbody>
                  {d.sources.map((s) => (
                    <tr key={s.id}>
                      <th scope="row">
                        <a href={`/sources/${s.id}`}>{s.name}</a>
                        {s.default ? <span class="muted"> (default)</span> : null}
                      </th>
                      <td data-label="Repository">
                        <code>{s.repoUrl}</code> <span class="muted">{s.branch}{s.path ? `:${s.path}` : ""}</span>
                      </td>
                      <td data-label="Policy">{s.policy}</td>
                      <td data-label="State">{s.suspended ? <ToneBadge tone="warn" text="suspended" /> : <ToneBadge tone="ok" text="syncing" />}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          ) : (
            <p class="muted">No sources.</p>
          )
        }
      </Loading>
    </Page>
  );
}

export function Source(props: { id: string }) {
  const path = { params: { path: { id: props.id } } };
  const src = useLoad(() => api.GET("/api/v1/sources/{id}", path), [props.id]);
  const st = useLoad(() => api.GET("/api/v1/sources/{id}/status", path), [props.id]);
  const cand = useLoad(() => api.GET("/api/v1/sources/{id}/candidate", path), [props.id]);
  return (
    <Page title={src.data?.name ?? "Source"} sub="Source">
      <Loading l={st}>
        {(s) => (
          <>
            <StatusBlock s={s} />
          </>
        )}
      </Loading>
      <Loading l={src}>
        {(s) => (
          <>
            <h2>Actions</h2>
            <div class="actions">
              <Action label="Sync" call={() => api.POST("/api/v1/sources/{id}/sync", path)} />
              {s.suspended ? (
                <Action label="Resume" call={() => api.POST("/api/v1/sources/{id}/resume", path)} onDone={src.reload} />
              ) : (
                <Action label="Suspend" call={() => api.POST("/api/v1/sources/{id}/suspend", path)} onDone={src.reload} />
              )}
            </div>
            <dl class="facts">
              <dt>Repository</dt>
              <dd>
                <code>{s.repoUrl}</code>, branch {s.branch}
                {s.path ? `, path ${s.path}` : ""}
              </dd>
              <dt>Policy</dt>
              <dd>{s.policy}</dd>
              <dt>Sync interval</dt>
              <dd>{s.syncIntervalSec} s</dd>
            </dl>
          </>
        )}
      </Loading>
      <h2>Candidate</h2>
      {cand.data === undefined ? (
        <p class="muted">{cand.error ? "No candidate waits for review." : "Loading…"}</p>
      ) : (
        <>
          <dl class="facts">
            <dt>State</dt>
            <dd>
              <ToneBadge tone="warn" text={cand.data.state} /> under {cand.data.policy}
            </dd>
            <dt>Commit</dt>
            <dd>
              <code>{cand.data.commit}</code> {cand.data.commitMessage}
            </dd>
            <dt>Fetched</dt>
            <dd>
              <When at={cand.data.fetchedAt} />
            </dd>
            <dt>Creates</dt>
            <dd>
              <List items={cand.data.created} />
            </dd>
            <dt>Updates</dt>
            <dd>
              <List items={cand.data.updated} />
            </dd>
            <dt>Makes stale</dt>
            <dd>
              <List items={cand.data.stale} />
            </dd>
            <dt>Invalid</dt>
            <dd>
              <List items={cand.data.invalid.map((u) => `${u.path} (${u.reason})`)} />
            </dd>
            <dt>Fingerprint</dt>
            <dd>
              <code>{cand.data.fingerprint}</code>
            </dd>
          </dl>
          <Action
            label="Accept"
            call={() =>
              api.POST("/api/v1/sources/{id}/accept", {
                ...path,
                body: { commit: cand.data!.commit, fingerprint: cand.data!.fingerprint },
              })
            }
          />
        </>
      )}
    </Page>
  );
}
