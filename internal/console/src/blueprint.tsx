import { api } from "./api.ts";
import { Action, Digest, List, Loading, Page, ReasonAction, StatusBlock, ToneBadge, useLoad, When } from "./ui.tsx";

export function Blueprint(props: { name: string }) {
  const name = props.name;
  const path = { params: { path: { name } } };
  const l = useLoad(() => api.GET("/api/v1/blueprints/{name}", path), [name]);
  return (
    <Page title={name} sub="Blueprint">
      <Loading l={l}>
        {(b) => (
          <>
            <StatusBlock s={b.status} />

            <h2>Nodes</h2>
            {b.nodes.length ? (
              <div class="scroll">
                <table class="stack">
                  <thead>
                    <tr>
                      <th scope="col">Node</th>
                      <th scope="col">State</th>
                      <th scope="col">Digest</th>
                      <th scope="col">Reason</th>
                    </tr>
                  </thead>
                  <tbody>
                    {b.nodes.map((n) => (
                      <tr key={n.node}>
                        <th scope="row">
                          {n.node} <span class="muted">({n.nodeState})</span>
                        </th>
                        <td data-label="State">
                          <ToneBadge tone={n.tone} text={n.state} />
                        </td>
                        <td data-label="Digest">
                          <Digest d={n.digest} />
                          {n.pid ? <span class="muted"> pid {n.pid}</span> : null}
                        </td>
                        <td data-label="Reason">
                          {n.reason}
                          {n.action ? <div class="next">Next: {n.action}</div> : null}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            ) : (
              <p class="muted">No node rows yet.</p>
            )}

            <h2>Placement plan</h2>
            <dl class="facts">
              <dt>Selector</dt>
              <dd>
                <code>{b.selector || "(every node)"}</code> · policy {b.placementPolicy}
              </dd>
              <dt>Target</dt>
              <dd>
                <List items={b.plan.target} />
              </dd>
              <dt>Adds</dt>
              <dd>
                <List items={b.plan.add} />
              </dd>
              <dt>Removes</dt>
              <dd>
                <List items={b.plan.remove} />
              </dd>
              <dt>Held</dt>
              <dd>
                <List items={b.plan.held.map((h) => `${h.node} (${h.reason})`)} />
              </dd>
              <dt>Not ready</dt>
              <dd>
                <List items={b.plan.unready.map((h) => `${h.node} (${h.reason})`)} />
              </dd>
              <dt>Fingerprint</dt>
              <dd>
                <code>{b.plan.fingerprint}</code>
              </dd>
              {b.placement ? (
                <>
                  <dt>Approved</dt>
                  <dd>
                    {b.placement.nodes.join(", ")} by {b.placement.approvedBy} <When at={b.placement.at} />
                  </dd>
                </>
              ) : null}
              {b.decline ? (
                <>
                  <dt>Declined</dt>
                  <dd>{b.decline.reason}</dd>
                </>
              ) : null}
            </dl>
            <div class="actions">
              <Action
                label="Approve placement"
                disabled={!b.plan.change}
                call={() =>
                  api.POST("/api/v1/blueprints/{name}/placement/approve", { ...path, body: { fingerprint: b.plan.fingerprint } })
                }
                onDone={l.reload}
              />
              {!b.plan.change ? <span class="muted">The plan changes nothing: no placement to approve.</span> : null}
            </div>

            <h2>Rollout</h2>
            {b.rollout ? (
              <dl class="facts">
                <dt>State</dt>
                <dd>
                  {b.rollout.kind} {b.rollout.state} of <Digest d={b.rollout.digest} /> to {b.rollout.nodes.join(", ")}
                </dd>
                <dt>Authorized</dt>
                <dd>
                  by {b.rollout.authorizedBy} <When at={b.rollout.at} /> under {b.rollout.policy}
                </dd>
                {b.rollout.pause ? (
                  <>
                    <dt>Paused</dt>
                    <dd>
                      by {b.rollout.pause.by} <When at={b.rollout.pause.at} />: {b.rollout.pause.reason}
                    </dd>
                  </>
                ) : null}
                {b.rollout.error ? (
                  <>
                    <dt>Error</dt>
                    <dd>{b.rollout.error}</dd>
                  </>
                ) : null}
                {b.rollout.runId ? (
                  <>
                    <dt>Run</dt>
                    <dd>
                      <a href={`/journal/${b.rollout.runId}`}>{b.rollout.runId}</a>
                    </dd>
                  </>
                ) : null}
              </dl>
            ) : (
              <p class="muted">No rollout yet. Artifact <Digest d={b.digest} />.</p>
            )}
            <div class="actions">
              <Action
                label="Authorize rollout"
                disabled={!b.actions.authorize.enabled}
                why={b.actions.authorize.why}
                call={() => api.POST("/api/v1/blueprints/{name}/rollout/authorize", path)}
                onDone={l.reload}
              />
              <Action
                label="Resume"
                disabled={!b.actions.resume.enabled}
                why={b.actions.resume.why}
                call={() => api.POST("/api/v1/blueprints/{name}/rollout/resume", path)}
              />
              <Action
                label="Roll back"
                danger
                disabled={!b.actions.rollback.enabled}
                why={b.actions.rollback.why}
                confirm={`Roll ${name} back on every node of its rollout?`}
                call={() => api.POST("/api/v1/blueprints/{name}/rollout/rollback", { ...path, body: { scope: "all" } })}
              />
            </div>
            <ReasonAction
              label="Pause rollout"
              placeholder="why the rollout should stop"
              disabled={!b.actions.pause.enabled}
              why={b.actions.pause.why}
              call={(reason) => api.POST("/api/v1/blueprints/{name}/rollout/pause", { ...path, body: { reason } })}
            />

            <h2>History</h2>
            {b.history.length ? (
              <ul>
                {b.history.map((h) => (
                  <li key={h.id}>
                    {h.kind} {h.state} of <Digest d={h.digest} /> to {h.nodes.join(", ")} by {h.authorizedBy} <When at={h.at} />
                  </li>
                ))}
              </ul>
            ) : (
              <p class="muted">none</p>
            )}
          </>
        )}
      </Loading>
    </Page>
  );
}
