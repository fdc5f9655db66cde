import { api, type Schemas, type Tone } from "./api.ts";
import { Action, Labels, Loading, Page, ToneBadge, useLoad, When } from "./ui.tsx";

type Node = Schemas["Node"];

const nodeTones: Record<Node["state"], Tone> = {
  Ready: "ok",
  Unreachable: "error",
  Cordoned: "warn",
  "Needs upgrade": "warn",
  "Never reported": "info",
  Revoked: "info",
};

export function Nodes() {
  const l = useLoad(() => api.GET("/api/v1/nodes"), []);
  return (
    <Page title="Nodes" sub="The hosts services and Blueprints run on: cordon one and nothing new is placed there.">
      <Loading l={l}>
        {(d) =>
          d.nodes.length ? (
            <div class="scroll">
              <table class="stack">
                <thead>
                  <tr>
                    <th scope="col">Node</th>
                    <th scope="col">State</th>
                    <th scope="col">Labels</th>
                    <th scope="col">Last heartbeat</th>
                    <th scope="col">What runs there</th>
                    <th scope="col">Actions</th>
                  </tr>
                </thead>
                <tbody>
                  {d.nodes.map((n) => (
                    <tr key={n.name}>
                      <th scope="row">
                        {n.name}
                        {n.local ? <span class="muted"> (local)</span> : null}
                      </th>
                      <td data-label="State">
                        <ToneBadge tone={nodeTones[n.state]} text={n.state} />
                        {n.reason ? <div class="muted">{n.reason}</div> : null}
                      </td>
                      <td data-label="Labels">
                        <Labels labels={n.labels as Record<string, string>} />
                      </td>
                      <td data-label="Last heartbeat">
                        <When at={n.lastHeartbeatAt} />
                      </td>
                      <td data-label="Runs there">
                        {(n.reported.processes ?? []).length ? (
                          <ul class="plain">
                            {(n.reported.processes ?? []).map((p) => (
                              <li key={p.service}>
                                {p.service} {p.running ? `pid ${p.pid ?? "?"}` : <span class="muted">not running</span>}
                              </li>
                            ))}
                          </ul>
                        ) : (
                          <span class="muted">nothing reported</span>
                        )}
                      </td>
                      <td data-label="Actions">
                        {n.state === "Cordoned" ? (
                          <Action
                            label={`Uncordon ${n.name}`}
                            call={() => api.POST("/api/v1/nodes/{name}/uncordon", { params: { path: { name: n.name } } })}
                            onDone={l.reload}
                          />
                        ) : n.state !== "Revoked" ? (
                          <Action
                            label={`Cordon ${n.name}`}
                            call={() => api.POST("/api/v1/nodes/{name}/cordon", { params: { path: { name: n.name } } })}
                            onDone={l.reload}
                          />
                        ) : null}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          ) : (
            <p class="muted">No nodes: serve's own host runs services until you add one with `sluice node add`.</p>
          )
        }
      </Loading>
    </Page>
  );
}
