// What the benchmarks' Node scripts share (the Rust side is tests/src/playwright.rs): Playwright's
// Chromium launched from the script's configuration with every request answered by `routeFromHAR`, and
// the JSON-lines conversation with the benchmark that started the script. Hand-written JavaScript because
// what the benchmarks measure is Playwright's own HAR replay, and Playwright's API is JavaScript.
//
// The configuration is the script's first argument, JSON: {nodeModules, har, chromium, args, viewport?},
// with `playwright-core` installed under `nodeModules`. The conversation: {"ready": {playwright, browser}}
// once the browser runs, then one command a line on stdin, each answered with one line on stdout, until
// {"close": true}, answered {"closed": true} once the browser is closed. Logs go to stderr only.

import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

export const config = JSON.parse(process.argv[2]);
// playwright-core is CommonJS, installed outside the sources: require it from there.
const require = createRequire(path.join(config.nodeModules, "noop.js"));
const { chromium } = require("playwright-core");

export const browser = await chromium.launch({ executablePath: config.chromium, headless: true, args: config.args });
export const context = await browser.newContext(config.viewport ? { viewport: config.viewport } : {});
// Every request from the HAR; what it does not hold is aborted, as nothing is live.
await context.routeFromHAR(config.har, { notFound: "abort" });

// Answers each command with what `answer` returns for it, or {"error": describe(error)} when it throws.
export async function converse(answer, describe = (error) => String(error?.message ?? error)) {
  // The benchmark may be gone (interrupted): then there is no one to answer.
  process.stdout.on("error", () => process.exit(1));
  const say = (message) => process.stdout.write(JSON.stringify(message) + "\n");
  const playwright = require("playwright-core/package.json").version;
  say({ ready: { playwright, browser: browser.version() } });
  for await (const line of readline.createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const command = JSON.parse(line);
    if (command.close) break;
    try {
      say(await answer(command));
    } catch (error) {
      say({ error: describe(error) });
    }
  }
  await browser.close();
  say({ closed: true });
}
