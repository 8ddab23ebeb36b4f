// The Playwright side of the `replay_pageload` benchmark (tests/benches/replay_pageload.rs): Debian's
// Chromium driven by Playwright, every request answered by `routeFromHAR` from the bundle's recording.har.
// Hand-written JavaScript because what is measured is Playwright's own HAR replay, and Playwright's API is
// JavaScript; the Rust benchmark starts this script and drives it, so that both sides load the same pages
// interleaved from one place.
//
// Started as `node routefromhar.mjs CONFIG_JSON` (see ../playwright.mjs, which also speaks for it), it
// answers one command:
//   {"load": URL}  → {"ms": loadEventEnd, "title": T, "requests": N, "failed": [URL, ...]}  or  {"error": MESSAGE}

import { context, converse } from "../playwright.mjs";

const WAIT_MS = 20_000;
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

await converse((command) => load(command.load));
