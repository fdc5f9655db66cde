// followRun reads a run's event stream. EventSource cannot send an
// Authorization header, so this reads the stream with fetch and parses the
// server-sent events itself, resuming after a dropped connection with
// Last-Event-ID (the seq of the last event it saw), the way EventSource would.
import type { Run, Schemas } from "./api.ts";
import { signOut, token } from "./session.ts";

export type RunEvent = Schemas["Event"];

export interface FollowHandlers {
  event(e: RunEvent): void;
  end(run: Run): void;
  status(s: "connecting" | "live" | "reconnecting" | "done", detail?: string): void;
}

interface Message {
  id?: string;
  event: string;
  data: string;
}

// parse splits complete messages off buf and returns them with the rest.
export function parse(buf: string): { messages: Message[]; rest: string; retry?: number } {
  const messages: Message[] = [];
  let retry: number | undefined;
  buf = buf.replace(/\r\n?/g, "\n");
  let at: number;
  while ((at = buf.indexOf("\n\n")) >= 0) {
    const block = buf.slice(0, at);
    buf = buf.slice(at + 2);
    const m: Message = { event: "message", data: "" };
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") data.push(value);
      else if (field === "event") m.event = value;
      else if (field === "id") m.id = value;
      else if (field === "retry" && /^\d+$/.test(value)) retry = Number(value);
    }
    if (data.length) {
      m.data = data.join("\n");
      messages.push(m);
    }
  }
  return retry === undefined ? { messages, rest: buf } : { messages, rest: buf, retry };
}

export async function followRun(id: string, h: FollowHandlers, signal: AbortSignal): Promise<void> {
  let last = "";
  let retry = 1000;
  h.status("connecting");
  while (!signal.aborted) {
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    const t = token();
    if (t) headers["Authorization"] = `Bearer ${t}`;
    if (last) headers["Last-Event-ID"] = last;
    let resp: Response;
    try {
      resp = await fetch(`/api/v1/journal/${encodeURIComponent(id)}/events`, {
        headers,
        signal,
        credentials: "omit",
        cache: "no-store",
      });
    } catch {
      if (signal.aborted) return;
      h.status("reconnecting", "The connection failed; trying again.");
      await sleep(retry, signal);
      continue;
    }
    if (resp.status === 204) {
      h.status("done");
      return;
    }
    if (resp.status === 401) {
      signOut("The server did not accept the token: sign in again.");
      return;
    }
    if (!resp.ok || !resp.body) {
      let detail = `The server answered ${resp.status}.`;
      try {
        const p = (await resp.json()) as { detail?: string };
        if (p.detail) detail = p.detail;
      } catch {
        /* not JSON */
      }
      h.status("done", detail);
      return;
    }
    h.status("live");
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        const p = parse(buf);
        buf = p.rest;
        if (p.retry !== undefined) retry = p.retry;
        for (const m of p.messages) {
          if (m.id !== undefined) last = m.id;
          if (m.event === "event") h.event(JSON.parse(m.data) as RunEvent);
          else if (m.event === "end") {
            h.end(JSON.parse(m.data) as Run);
            h.status("done");
            return;
          } else if (m.event === "error") {
            h.status("done", (JSON.parse(m.data) as { message: string }).message);
            return;
          }
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    h.status("reconnecting", "The stream was cut; resuming after the last event.");
    await sleep(retry, signal);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });
}
