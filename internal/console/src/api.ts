// The typed client: openapi-fetch on the types generated from the served
// spec, so that a change in the API that breaks a page breaks the build.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "../../apiclient/ts/schema.d.ts";
import { signOut, token } from "./session.ts";

export type Schemas = components["schemas"];
export type Run = Schemas["Run"];
export type Tone = Schemas["Application"]["tone"];

const auth: Middleware = {
  onRequest({ request }) {
    const t = token();
    if (t) request.headers.set("Authorization", `Bearer ${t}`);
    return request;
  },
  onResponse({ response }) {
    if (response.status === 401) signOut("The server did not accept the token: sign in again.");
    return response;
  },
};

export const api = createClient<paths>({ baseUrl: location.origin, credentials: "omit" });
api.use(auth);

// problem is the sentence to show for an error answer: the API's detail,
// which says what to do next, or its title.
export function problem(err: unknown, status?: number): string {
  if (err && typeof err === "object") {
    const e = err as { detail?: unknown; title?: unknown; errors?: Array<{ message?: string; location?: string }> };
    const parts: string[] = [];
    if (typeof e.detail === "string") parts.push(e.detail);
    else if (typeof e.title === "string") parts.push(e.title);
    for (const d of e.errors ?? []) {
      if (d.message) parts.push(d.location ? `${d.location}: ${d.message}` : d.message);
    }
    if (parts.length) return parts.join(" ");
  }
  if (err instanceof Error) return err.message;
  return status ? `The server answered ${status}.` : "The request failed.";
}

export const finalStates: ReadonlyArray<Run["state"]> = ["succeeded", "failed", "unknown", "cancelled"];
