// A typed client of sluice's API on openapi-fetch and the generated types:
// list the units, ask for a sync, and follow its run to the end. It is
// type-checked in CI against freshly generated types, so an API change that
// breaks a client breaks this first.
//
//   SLUICE_URL=http://127.0.0.1:8080 SLUICE_TOKEN=… node --experimental-strip-types example.ts
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.d.ts";

type Run = components["schemas"]["Run"];

const finalStates: ReadonlyArray<Run["state"]> = ["succeeded", "failed", "unknown", "cancelled"];

export async function syncAndFollow(baseUrl: string, token: string): Promise<Run> {
  const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });

  const units = await client.GET("/api/v1/units", { params: { query: { limit: 20 } } });
  if (units.error) {
    throw new Error(`list units: ${units.error.detail ?? units.error.title ?? "error"}`);
  }
  for (const u of units.data.units) {
    console.log(`${u.status}\t${u.kind}\t${u.path}`);
  }

  const sync = await client.POST("/api/v1/gitops/sync", { params: { query: { full: false } } });
  if (sync.error) {
    // 409: a sync is already queued or running; its detail names the run.
    throw new Error(`sync: ${sync.error.detail ?? sync.error.title ?? "error"}`);
  }
  const id = sync.data.journalId;
  for (;;) {
    const run = await client.GET("/api/v1/journal/{id}", { params: { path: { id } } });
    if (run.error) {
      throw new Error(`run ${id}: ${run.error.detail ?? "error"}`);
    }
    if (finalStates.includes(run.data.state)) {
      return run.data;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const url = process.env["SLUICE_URL"];
const token = process.env["SLUICE_TOKEN"];
if (url && token) {
  const run = await syncAndFollow(url, token);
  console.log(`run ${run.id} ${run.state}${run.error ? `: ${run.error}` : ""}`);
}
