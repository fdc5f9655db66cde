// The session is the API token, kept in sessionStorage: it survives a reload
// of the tab, is gone when the tab closes, and never enters a URL, the
// history or a cookie. Every request carries it as a bearer header, which a
// cross-site page cannot make a browser add, so a forged request cannot act.
const key = "sluice.token";
// The role of the token, read from GET /api/v1/session at sign-in: the
// console offers only the actions it allows. It is a courtesy, not a guard:
// the API refuses what the role may not do whatever the console shows.
const roleKey = "sluice.role";

export type Role = "viewer" | "operator" | "admin";
const rank: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

let listeners: Array<() => void> = [];

export function token(): string | null {
  try {
    return sessionStorage.getItem(key);
  } catch {
    return null;
  }
}

export function role(): Role | null {
  try {
    const r = sessionStorage.getItem(roleKey);
    return r === "viewer" || r === "operator" || r === "admin" ? r : null;
  } catch {
    return null;
  }
}

// allows reports whether the signed-in token's role reaches need. Before the
// role is known, it does not: buttons appear once it is.
export function allows(need: Role): boolean {
  const r = role();
  return r !== null && rank[r] >= rank[need];
}

export function signIn(t: string, r: Role): void {
  sessionStorage.setItem(key, t.trim());
  sessionStorage.setItem(roleKey, r);
  notify();
}

// signOut forgets the token; reason, when given, is shown on the sign-in form.
export function signOut(reason?: string): void {
  sessionStorage.removeItem(key);
  sessionStorage.removeItem(roleKey);
  lastReason = reason ?? "";
  notify();
}

let lastReason = "";

export function signOutReason(): string {
  return lastReason;
}

export function onSessionChange(fn: () => void): () => void {
  listeners.push(fn);
  return () => {
    listeners = listeners.filter((l) => l !== fn);
  };
}

function notify(): void {
  for (const l of listeners) l();
}
