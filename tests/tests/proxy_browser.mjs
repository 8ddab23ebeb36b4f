// A browser that replay does not launch, as an agent's harness launches it: Playwright's Chromium with
// its proxy set to `trace-replay serve --proxy-port`, HTTPS errors ignored. JavaScript because it is
// Playwright's own launch that is under test, and Playwright's API is JavaScript.
//
// The configuration is the script's first argument, JSON: {nodeModules, chromium, args, proxy, steps},
// each step one of {goto: URL}, {fill: [selector, text]}, {click: selector}, {press: [selector, key]},
// {select: [selector, value]}, {check: selector},
// {text: [selector, substring]} (waits until the element's text holds it), {url: substring} (waits for
// the page's URL). Prints one JSON line: {"ok": true} or {"error": what, "step": index}.

import { createRequire } from "node:module";
import path from "node:path";

const config = JSON.parse(process.argv[2]);
const require = createRequire(path.join(config.nodeModules, "noop.js"));
const { chromium } = require("playwright-core");

const browser = await chromium.launch({
  executablePath: config.chromium,
  headless: true,
  args: config.args,
  proxy: { server: config.proxy },
});
const context = await browser.newContext({ ignoreHTTPSErrors: true });
const page = await context.newPage();
const timeout = 20_000;
let result = { ok: true };
for (const [index, step] of config.steps.entries()) {
  try {
    if (step.goto) await page.goto(step.goto, { timeout });
    else if (step.fill) await page.fill(step.fill[0], step.fill[1], { timeout });
    else if (step.click) await page.click(step.click, { timeout });
    else if (step.press) await page.press(step.press[0], step.press[1], { timeout });
    else if (step.select) await page.selectOption(step.select[0], step.select[1], { timeout });
    else if (step.check) await page.check(step.check, { timeout });
    else if (step.text) {
      const [selector, wanted] = step.text;
      await page.waitForFunction(
        ([selector, wanted]) => document.querySelector(selector)?.textContent.includes(wanted),
        [selector, wanted],
        { timeout },
      );
    } else if (step.url) await page.waitForURL((url) => url.href.includes(step.url), { timeout });
    else throw new Error(`unknown step ${JSON.stringify(step)}`);
  } catch (error) {
    result = { error: String(error?.message ?? error), step: index };
    break;
  }
}
// As a harness does before it scores (BrowserGym's package does): the page as it is now, reported to the
// proxy's episode (`trace-replay`'s page/report.js).
await page.evaluate((name) => globalThis[name]?.(), "__trace_replay_report_now__").catch(() => {});
await browser.close();
process.stdout.write(JSON.stringify(result) + "\n");
