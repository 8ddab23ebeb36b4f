// Builds ArchiveWeb.page's recording extension (its background service worker) from the sources its npm
// package publishes, which lack the project's own build configuration. Run by `.ci/install` in a copy of
// this folder where `npm ci` has installed the package; writes the unpacked extension to `extension/`.
// This is JavaScript because esbuild's API is; esbuild rather than the project's webpack because it is one
// dependency, transpiles TypeScript without type-checking (the sources carry hundreds of suppressed type
// errors), and the two special imports below take a small plugin.
import { build } from "esbuild";
import { cpSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const here = import.meta.dirname;
const sources = join(here, "node_modules/@webrecorder/archivewebpage/src");
const out = join(here, "extension");

const importsAsText = {
  name: "imports-as-text",
  setup(build) {
    // The recorder extracts a PDF's text with a script of the project's own (static/extractPDF.js, not
    // published) injected into PDF pages: the benchmark loads none, so an extractor that finds no text
    // stands in for it.
    build.onResolve({ filter: /^@\/static\/extractPDF\.js$/ }, () => ({ path: "extractPDF", namespace: "stub" }));
    build.onLoad({ filter: /.*/, namespace: "stub" }, () => ({
      contents: "async function extractPDF() { return ''; }",
      loader: "text",
    }));
    // The recorder injects Browsertrix Behaviors into every page it records, as source text (the
    // project's webpack configuration imports it raw).
    build.onLoad({ filter: /browsertrix-behaviors[\\/]dist[\\/]behaviors\.js$/ }, async (args) => ({
      contents: await import("node:fs/promises").then((fs) => fs.readFile(args.path, "utf8")),
      loader: "text",
    }));
  },
};

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "ruffle"), { recursive: true });
await build({
  entryPoints: [join(sources, "ext/bg.ts")],
  outfile: join(out, "bg.js"),
  bundle: true,
  format: "iife",
  platform: "browser",
  target: "chrome120",
  plugins: [importsAsText],
  logLevel: "warning",
});
for (const file of ["manifest.json", "popup.html", "popup.js"]) {
  cpSync(join(here, file), join(out, file));
}
// The background ends with importScripts("sw.js"), the replay service worker of the project's web app
// (viewing archives), which recording does not use: an empty one keeps the background from failing there.
writeFileSync(join(out, "sw.js"), "");
// The recorder adds a <script> for ruffle/ruffle.js (Ruffle, a Flash emulator, which the project ships
// there) to every page it records: an empty one, so that the request succeeds as it does in the real
// extension, without Ruffle's own cost.
writeFileSync(join(out, "ruffle/ruffle.js"), "");
