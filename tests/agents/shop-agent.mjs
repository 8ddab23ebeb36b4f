// A scripted agent for the evaluation tests: it drives the replayed demo shop through Playwright's
// `connectOverCDP`, as a researcher's agent would, and answers in `TRACE_OUT`. Hand-written JavaScript
// because it stands for the agents people bring, which speak CDP from Playwright or browser-use.
//
// Usage: node shop-agent.mjs NODE_MODULES MODE, with `playwright-core` installed under NODE_MODULES and the
// environment `trace-replay eval` gives an agent (TRACE_CDP_URL, TRACE_START_URL, TRACE_CREDENTIALS,
// TRACE_OUT). MODE:
//   other-path  does the task, but reaches the search results by their URL instead of typing the search
//   halfway     logs in, then stops and says it is done
//   wrong       browses the help and the deals, never logs in
//   title       reads the start page's title and answers with it (an episode with as little agent as can be)
//   crash       connects, then exits with code 3
//   hang        connects, then never ends
//   silent      does the task but writes no answer
//   malformed   does the task, then writes a done.json that does not parse
//   no-connect  writes an answer without ever reaching the browser

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [nodeModules, mode] = process.argv.slice(2);
const out = process.env.TRACE_OUT;
const done = (text) => fs.writeFileSync(path.join(out, "done.json"), JSON.stringify({ text, success: true }));

if (mode === "no-connect") {
  done("I did it");
  process.exit(0);
}

// playwright-core is CommonJS, installed outside the sources: require it from there.
const require = createRequire(path.join(nodeModules, "noop.js"));
const { chromium } = require("playwright-core");
const browser = await chromium.connectOverCDP(process.env.TRACE_CDP_URL);
const page = browser.contexts()[0].pages()[0];
const start = new URL(process.env.TRACE_START_URL);
const at = (where) => new URL(where, start).href;

if (mode === "crash") process.exit(3);
if (mode === "hang") await new Promise(() => {});

async function logIn() {
  const credentials = JSON.parse(fs.readFileSync(process.env.TRACE_CREDENTIALS, "utf8"));
  const password = Object.entries(credentials).find(([name]) => name.endsWith(".password"))[1];
  await page.goto(at("/login"));
  await page.fill("#username", "ann");
  await page.fill("#password", password);
  await Promise.all([page.waitForURL("**/account"), page.click("#login-submit")]);
}

if (mode === "title") {
  done(await page.title());
} else if (mode === "wrong") {
  await page.goto(at("/help"));
  await page.goto(at("/deals"));
  done("There is nothing to buy");
} else {
  await logIn();
  if (mode === "halfway") {
    done("Logged in");
  } else {
    await page.selectOption("#shipping", "express");
    await page.check("#gift-wrap");
    await Promise.all([page.waitForURL("**/cart"), page.click("#add-to-cart")]);
    await page.goto(at("/search?q=mug"));
    await page.goto(at("/"));
    if (mode === "malformed") fs.writeFileSync(path.join(out, "done.json"), "{not json");
    else if (mode !== "silent") done("The blue mug is in the cart");
  }
}
// Playwright's `close` on a browser it connected to leaves the browser running, as it should.
await browser.close();
