import { api, type Schemas } from "./api.ts";
import { Loading, Page, ToneBadge, useLoad } from "./ui.tsx";

type App = Schemas["Application"];
type Portfolio = Schemas["Portfolio"];

// allApplications reads every page of the portfolio, 1,000 applications at
// a time, into one: the pages' attention, one after the other, sorted by
// urgency (a stable sort) is the attention of all of them.
async function allApplications(): Promise<{ data?: Portfolio; error?: unknown; response: Response }> {
  const all: Portfolio = { applications: [], attention: [] };
  let cursor: string | undefined;
  for (;;) {
    const r = await api.GET("/api/v1/applications", { params: { query: cursor ? { limit: 1000, cursor } : { limit: 1000 } } });
    if (r.error !== undefined || !r.data) return { error: r.error, response: r.response };
    all.applications.push(...r.data.applications);
    all.attention.push(...r.data.attention);
    cursor = r.data.nextCursor;
    if (!cursor) {
      all.attention.sort((a, b) => a.urgency - b.urgency);
      return { data: all, response: r.response };
    }
  }
}

function href(a: App): string {
  return `/${a.kind === "service" ? "services" : "blueprints"}/${encodeURIComponent(a.name)}`;
}

function Row(props: { a: App }) {
  const a = props.a;
  return (
    <tr>
      <td data-label="State">
        <ToneBadge tone={a.tone} text={a.state} />
      </td>
      <td data-label="Application">
        <a href={href(a)}>{a.name}</a> <span class="muted">{a.kind}</span>
      </td>
      <td data-label="Stage">{a.stage}</td>
      <td data-label="Reason">
        {a.reason}
        {a.action ? <div class="next">Next: {a.action}</div> : null}
        {a.others > 0 || a.partial ? (
          <div class="muted">
            {a.others > 0 ? `+${a.others} other${a.others === 1 ? "" : "s"}` : ""}
            {a.others > 0 && a.partial ? " · " : ""}
            {a.partial ? "partial" : ""}
          </div>
        ) : null}
      </td>
    </tr>
  );
}

function Table(props: { apps: App[]; caption: string }) {
  return (
    <div class="scroll">
      <table class="stack">
        <caption class="sr">{props.caption}</caption>
        <thead>
          <tr>
            <th scope="col">State</th>
            <th scope="col">Application</th>
            <th scope="col">Stage</th>
            <th scope="col">Reason</th>
          </tr>
        </thead>
        <tbody>
          {props.apps.map((a) => (
            <Row a={a} key={`${a.kind}/${a.name}`} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Portfolio() {
  const l = useLoad(allApplications, []);
  return (
    <Page title="Portfolio" sub="Every service and Blueprint with its answer; what needs an operator comes first.">
      <Loading l={l}>
        {(p) => (
          <>
            <h2>Needs attention ({p.attention.length})</h2>
            {p.attention.length ? (
              <Table apps={p.attention} caption="Needs attention, most urgent first" />
            ) : (
              <p class="calm">
                <ToneBadge tone="ok" text="Nothing needs an operator." />
              </p>
            )}
            <h2>All applications ({p.applications.length})</h2>
            {p.applications.length ? (
              <Table apps={p.applications} caption="All applications" />
            ) : (
              <p class="muted">No services or Blueprints yet: add a source and sync it.</p>
            )}
          </>
        )}
      </Loading>
    </Page>
  );
}
