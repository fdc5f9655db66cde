// The console's shell: sign-in, the navigation and the routes.
import "./app.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, problem, type Schemas } from "./api.ts";
import { Blueprint } from "./blueprint.tsx";
import { Infrastructures } from "./infra.tsx";
import { Journal } from "./journal.tsx";
import { Nodes } from "./nodes.tsx";
import { Portfolio } from "./portfolio.tsx";
import { onLinkClick, useLocation } from "./router.ts";
import { Run } from "./run.tsx";
import { Service } from "./service.tsx";
import { Source, Sources } from "./sources.tsx";
import { onSessionChange, role, signIn, signOut, signOutReason, token } from "./session.ts";
import { Page } from "./ui.tsx";

function SignIn() {
  const [value, setValue] = useState("");
  const [err, setErr] = useState(signOutReason());
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const t = value.trim();
    if (!t) return;
    setBusy(true);
    setErr("");
    // Check the token before keeping it, and learn its role.
    const r = await fetch("/api/v1/session", { headers: { Authorization: `Bearer ${t}` }, credentials: "omit" }).catch(
      (e: unknown) => e,
    );
    setBusy(false);
    if (!(r instanceof Response)) {
      setErr(problem(r));
      return;
    }
    if (!r.ok) {
      setErr(problem(await r.json().catch(() => null), r.status));
      return;
    }
    const session = (await r.json().catch(() => null)) as Schemas["Token"] | null;
    if (!session) {
      setErr("The server's answer to the sign-in could not be read; try again.");
      return;
    }
    setValue("");
    signIn(t, session.role);
  };
  return (
    <main class="signin">
      <h1>sluice</h1>
      <form onSubmit={submit}>
        <label for="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {err ? (
          <p class="problem" role="alert">
            {err}
          </p>
        ) : null}
        <p class="muted">
          A token from <code>sluice token create</code> or the one <code>make run</code> printed. It stays in this tab
          until you sign out or close it.
        </p>
      </form>
    </main>
  );
}

function route(path: string, query: URLSearchParams) {
  const seg = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (seg.length === 0) return <Portfolio />;
  if (seg[0] === "services" && seg.length === 2) return <Service name={seg[1]!} key={seg[1]} />;
  if (seg[0] === "blueprints" && seg.length === 2) return <Blueprint name={seg[1]!} key={seg[1]} />;
  if (seg[0] === "nodes" && seg.length === 1) return <Nodes />;
  if (seg[0] === "sources" && seg.length === 1) return <Sources />;
  if (seg[0] === "sources" && seg.length === 2) return <Source id={seg[1]!} key={seg[1]} />;
  if (seg[0] === "infrastructure" && seg.length === 1) return <Infrastructures />;
  if (seg[0] === "journal" && seg.length === 1) return <Journal query={query} />;
  if (seg[0] === "journal" && seg.length === 2) return <Run id={seg[1]!} key={seg[1]} />;
  return (
    <Page title="Not found">
      <p>
        There is no page at <code>{path}</code>. <a href="/">Go to the portfolio.</a>
      </p>
    </Page>
  );
}

function Nav(props: { path: string }) {
  const links: Array<[string, string]> = [
    ["/", "Portfolio"],
    ["/sources", "Sources"],
    ["/infrastructure", "Infrastructure"],
    ["/nodes", "Nodes"],
    ["/journal", "Journal"],
  ];
  const current = (href: string) => (href === "/" ? props.path === "/" : props.path.startsWith(href));
  return (
    <header class="top">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <span class="brand">sluice</span>
      <nav aria-label="Main">
        <ul>
          {links.map(([href, label]) => (
            <li key={href}>
              <a href={href} aria-current={current(href) ? "page" : undefined}>
                {label}
              </a>
            </li>
          ))}
          <li>
            <a href="/docs" data-external>
              API
            </a>
          </li>
          <li>
            <a href="/riverui/" data-external>
              River UI
            </a>
          </li>
        </ul>
      </nav>
      <span class="muted role" title="The actions shown are the ones this role may take.">
        {role() ?? ""}
      </span>
      <button type="button" class="signout" onClick={() => signOut()}>
        Sign out
      </button>
    </header>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(token() !== null);
  const { path, query } = useLocation();
  const [, setRoleSeen] = useState(role());
  useEffect(
    () =>
      onSessionChange(() => {
        setSignedIn(token() !== null);
        setRoleSeen(role());
      }),
    [],
  );
  useEffect(() => {
    // A session kept from before the role was remembered learns it now.
    const t = token();
    if (t && !role()) {
      void api.GET("/api/v1/session").then((r) => {
        if (r.data && token() === t) signIn(t, r.data.role);
      });
    }
  }, [signedIn]);
  useEffect(() => {
    // Move focus to the new page's heading, so keyboard and screen-reader
    // users start there after a navigation.
    document.getElementById("page-title")?.focus({ preventScroll: true });
  }, [path]);
  if (!signedIn) return <SignIn />;
  return (
    <div onClick={onLinkClick}>
      <Nav path={path} />
      <main id="main">{route(path, query)}</main>
    </div>
  );
}

render(<App />, document.getElementById("app")!);
