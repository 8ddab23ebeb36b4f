// The Playwright side of the `replay_pageload` benchmark (tests/benches/replay_pageload.rs): Debian's
// Chromium driven by Playwright, every request answered by `routeFromHAR` from the bundle's recording.har.
// Hand-written JavaScript because what is measured is Playwright's own HAR replay, and Playwright's API is
// JavaScript; the Rust benchmark starts this script and drives it, so that both sides load the same pages
// interleaved from one place.
//
// Started as `node routefromhar.mjs CONFIG_JSON`, CONFIG_JSON = {nodeModules, har, chromium, args}, with
// `playwright-core` installed under `nodeModules`. Speaks JSON lines: it prints {"ready": ...} once the
// browser runs, then reads one command a line on stdin and answers each with one line on stdout:
//   {"load": URL}  → {"ms": loadEventEnd, "title": T, "requests": N, "failed": [URL, ...]}  or  {"error": MESSAGE}
//   {"close": true} → {"closed": true}, and exits.
// Logs go to stderr only.

import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const WAIT_MS = 20_000;
const config = JSON.parse(process.argv[2]);
// playwright-core is CommonJS, installed outside the sources: require it from there.
const require = createRequire(path.join(config.nodeModules, "noop.js"));
const { chromium } = require("playwright-core");
const playwrightVersion = require("playwright-core/package.json").version;

const browser = await chromium.launch({
  executablePath: config.chromium,
  headless: true,
  args: config.args,
});
const context = await browser.newContext();
// Every request from the HAR; what it does not hold is aborted, as nothing is live.
await context.routeFromHAR(config.har, { notFound: "abort" });
const page = await context.newPage();

let requests = 0;
let failed = [];
page.on("request", () => (requests += 1));
page.on("requestfailed", (request) => failed.push(request.url()));

// The time from navigation start to the end of the load event of the document at `url`, as its own
// Navigation Timing entry gives it, read from outside the page exactly as the Rust side reads it.
async function load(url) {
  await page.bringToFront();
  requests = 0;
  failed = [];
  await page.goto(url, { waitUntil: "load", timeout: WAIT_MS });
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    const ms = await page.evaluate((u) => {
      const entry = performance.getEntriesByType("navigation")[0];
      return entry && entry.name === u ? entry.loadEventEnd : 0;
    }, url);
    if (ms > 0) return { ms, title: await page.title(), requests, failed };
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`${url} did not finish loading in ${WAIT_MS} ms`);
}

// The benchmark may be gone (interrupted): then there is no one to answer.
process.stdout.on("error", () => process.exit(1));
const say = (message) => process.stdout.write(JSON.stringify(message) + "\n");
say({ ready: { playwright: playwrightVersion, browser: browser.version() } });

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  if (command.close) break;
  try {
    say(await load(command.load));
  } catch (error) {
    say({ error: String(error?.message ?? error) });
  }
}
await browser.close();
say({ closed: true });
