// Builds the console's vendored @ag-ui/client bundle from this directory's pinned packages:
//   node build-console.mjs OUT_DIR
// writes OUT_DIR/agui-client.js (one ES module: AbstractAgent, HttpAgent, Observable) and
// OUT_DIR/agui-client.licenses.txt (the license of every package inside it). The output is
// byte-stable for the same packages: tests/console checks the checked-in files against a rebuild.

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2];
if (!out) {
  console.error("usage: node build-console.mjs OUT_DIR");
  process.exit(2);
}

const result = await build({
  // Inputs are named relative to this directory: node_modules/<package>/…
  absWorkingDir: here,
  entryPoints: ["console-vendor.mjs"],
  bundle: true,
  format: "esm",
  minify: true,
  target: "es2022",
  legalComments: "none",
  metafile: true,
  write: false,
  outfile: join(out, "agui-client.js"),
  banner: {
    js: "// @ag-ui/client for the loopgate console, bundled by scripts/build-console (do not edit);\n// licenses: agui-client.licenses.txt",
  },
});

const packages = new Map(); // name → its directory
for (const input of Object.keys(Object.values(result.metafile.outputs)[0].inputs)) {
  const at = input.lastIndexOf("node_modules/");
  if (at < 0) continue;
  const parts = input.slice(at + "node_modules/".length).split("/");
  const name = parts[0].startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0];
  packages.set(name, join(here, input.slice(0, at), "node_modules", name));
}
const notices = [...packages.keys()].sort().map((name) => {
  const root = packages.get(name);
  const meta = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const file = readdirSync(root).find((f) => /^(licen[cs]e|copying)/i.test(f));
  const text = file ? readFileSync(join(root, file), "utf8").trim() : `License: ${meta.license}`;
  return `${name} ${meta.version} (${meta.license})\n\n${text}\n`;
});

mkdirSync(out, { recursive: true });
writeFileSync(join(out, "agui-client.js"), result.outputFiles[0].contents);
writeFileSync(join(out, "agui-client.licenses.txt"), notices.join(`\n${"-".repeat(72)}\n\n`));
