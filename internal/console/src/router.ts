// A small router over the History API: client routes are ordinary paths
// (/services/web, /journal/…), which serve answers with index.html.
import { useEffect, useState } from "preact/hooks";

let flash = "";

// navigate moves to a client route; note, when given, is shown once on the
// page it opens (an action's "joined run …").
export function navigate(to: string, note?: string): void {
  flash = note ?? "";
  history.pushState(null, "", to);
  dispatchEvent(new PopStateEvent("popstate"));
  window.scrollTo(0, 0);
}

export function takeFlash(): string {
  const f = flash;
  flash = "";
  return f;
}

export function useLocation(): { path: string; query: URLSearchParams } {
  const [loc, setLoc] = useState(() => ({ path: location.pathname, search: location.search }));
  useEffect(() => {
    const on = () => setLoc({ path: location.pathname, search: location.search });
    addEventListener("popstate", on);
    return () => removeEventListener("popstate", on);
  }, []);
  return { path: loc.path, query: new URLSearchParams(loc.search) };
}

// onLinkClick turns a plain left click on a same-origin link into a client
// navigation; modified clicks (new tab) keep the browser's behaviour.
export function onLinkClick(e: MouseEvent): void {
  const a = (e.target as Element | null)?.closest?.("a");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const href = a.getAttribute("href");
  if (!href || !href.startsWith("/") || href.startsWith("//") || a.target || a.hasAttribute("data-external")) return;
  e.preventDefault();
  navigate(href);
}
