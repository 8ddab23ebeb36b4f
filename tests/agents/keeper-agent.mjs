// The agent of the episode-isolation test (`the_episodes_of_a_run_share_nothing` in tests/tests/eval.rs):
// besides the start page the replay opened, it opens the start page again in the browser's default context
// (where Playwright's `browser.contexts()[0].newPage()` opens after `connectOverCDP`) and in a context of
// its own, so that each kind of page an agent can make keeps what it can and reports what it found (see the
// test's page). It writes the DevTools endpoint's browser id to TRACE_OUT/browser.txt (the same id for
// episodes in one browser), waits SECONDS, and answers. Hand-written JavaScript because it stands for the
// agents people bring, which speak CDP from Playwright.
//
// Usage: node keeper-agent.mjs NODE_MODULES SECONDS, with `playwright-core` under NODE_MODULES and the
// environment `trace-replay eval` gives an agent (TRACE_CDP_URL, TRACE_START_URL, TRACE_OUT).

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [nodeModules, seconds] = process.argv.slice(2);
const out = process.env.TRACE_OUT;
const require = createRequire(path.join(nodeModules, "noop.js"));
const { chromium } = require("playwright-core");

const version = await (await fetch(new URL("/json/version", process.env.TRACE_CDP_URL))).json();
fs.writeFileSync(path.join(out, "browser.txt"), new URL(version.webSocketDebuggerUrl).pathname);

const browser = await chromium.connectOverCDP(process.env.TRACE_CDP_URL);
const start = browser.contexts()[0].pages()[0];
await start.waitForFunction(() => document.title === "kept");
const keep = async (context, where) => {
  const page = await context.newPage();
  await page.goto(`${process.env.TRACE_START_URL}#${where}`);
  await page.waitForFunction(() => document.title === "kept");
};
await keep(browser.contexts()[0], "default");
await keep(await browser.newContext(), "own");
await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
fs.writeFileSync(path.join(out, "done.json"), JSON.stringify({ text: "ok" }));
process.exit(0);
