// Builds the console into the directory named by the first argument (dist/,
// which the binary embeds): one script, one stylesheet and index.html.
// The output is byte-for-byte the same for the same sources and lockfile, so
// CI can rebuild it and compare with what is committed.
import { build } from "esbuild";
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

const out = process.argv[2];
if (!out) {
  console.error("usage: node build.mjs <outdir>");
  process.exit(2);
}
await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
await build({
  entryPoints: { app: "src/main.tsx" },
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2022"],
  jsx: "automatic",
  jsxImportSource: "preact",
  legalComments: "eof",
  charset: "utf8",
  outdir: out,
  logLevel: "warning",
});
await copyFile("src/index.html", join(out, "index.html"));

// The bundle carries code of these packages; their licenses travel with it.
const bundled = ["preact", "openapi-fetch"];
let notices = "Third-party code in app.js, and its licenses.\n";
for (const name of bundled) {
  const pkg = JSON.parse(await readFile(join("node_modules", name, "package.json"), "utf8"));
  const text = await readFile(join("node_modules", name, "LICENSE"), "utf8");
  notices += `\n== ${name} ${pkg.version} (${pkg.license}) ==\n\n${text.trim()}\n`;
}
await writeFile(join(out, "licenses.txt"), notices);
