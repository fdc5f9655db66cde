// The session is the API token, kept in sessionStorage: it survives a reload
// of the tab, is gone when the tab closes, and never enters a URL, the
// history or a cookie. Every request carries it as a bearer header, which a
// cross-site page cannot make a browser add, so a forged request cannot act.
const key = "sluice.token";

let listeners: Array<() => void> = [];

export function token(): string | null {
  try {
    return sessionStorage.getItem(key);
  } catch {
    return null;
  }
}

export function signIn(t: string): void {
  sessionStorage.setItem(key, t.trim());
  notify();
}

// signOut forgets the token; reason, when given, is shown on the sign-in form.
export function signOut(reason?: string): void {
  sessionStorage.removeItem(key);
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
