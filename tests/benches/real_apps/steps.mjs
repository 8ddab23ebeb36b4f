// The Playwright side of the `real_apps` benchmark (tests/benches/real_apps.rs): Debian's Chromium driven
// by Playwright, every request answered by `routeFromHAR` from an exported bundle, the demonstration's
// steps carried out the way a Playwright user writes them (locators that wait for their element, `fill`,
// `selectOption`, `keyboard.press`). Hand-written JavaScript because what is measured is Playwright's own
// HAR replay and its API is JavaScript. The Rust benchmark sends the steps and judges every step of both
// tools with the same rules; this script only acts and reports what the browser shows.
//
// Started as `node steps.mjs CONFIG_JSON`, CONFIG_JSON = {nodeModules, har, chromium, args, viewport}.
// Speaks JSON lines: {"ready": ...} once the browser runs, then one answer per command:
//   {"step": TOOL_CALL, "timeoutMs": N} → {"ok": true} or {"error": MESSAGE}
//   {"pages": true}                     → {"urls": [URL, ...], "current": INDEX}
//   {"use": INDEX}                      → {"ok": true}
//   {"html": true}                      → {"html": OUTER_HTML of the current page}
//   {"close": true}                     → {"closed": true}, and exits.

import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const config = JSON.parse(process.argv[2]);
const require = createRequire(path.join(config.nodeModules, "noop.js"));
const { chromium } = require("playwright-core");
const playwrightVersion = require("playwright-core/package.json").version;

const browser = await chromium.launch({ executablePath: config.chromium, headless: true, args: config.args });
const context = await browser.newContext(config.viewport ? { viewport: config.viewport } : {});
await context.routeFromHAR(config.har, { notFound: "abort" });
let current = await context.newPage();

// The step's element: its CSS selector, else its XPath, as Playwright users write locators; inside the
// iframes of its frame path (outermost first) through `frameLocator`.
async function locate(target, timeout) {
  let scope = current;
  for (const frame of target.frame_path ?? []) scope = scope.frameLocator(frame);
  const css = scope.locator(target.selector).first();
  if (target.selector && (await css.count()) > 0) return css;
  if (target.xpath) {
    const byXpath = scope.locator(`xpath=${target.xpath}`).first();
    if ((await byXpath.count()) > 0) return byXpath;
  }
  await css.waitFor({ state: "visible", timeout });
  return css;
}

async function step(call, timeout) {
  const params = call.params ?? {};
  const target = call.target ? await locate(call.target, timeout) : null;
  switch (call.name) {
    case "navigate":
      await current.goto(params.url, { waitUntil: "load", timeout });
      break;
    case "click": {
      const options = { timeout, modifiers: params.modifiers ?? [] };
      if ((params.count ?? 1) === 2) await target.dblclick(options);
      else await target.click(options);
      break;
    }
    case "input":
      try {
        await target.fill(params.text, { timeout });
      } catch {
        // Not a fillable element (a code editor's surface): type as a person would.
        await target.click({ timeout });
        await current.keyboard.press("Control+A");
        await current.keyboard.type(params.text);
      }
      break;
    case "select_dropdown":
      await target.selectOption(params.option.split(", ").map((label) => ({ label })), { timeout });
      break;
    case "send_keys":
      if (target) await target.press(params.keys, { timeout });
      else await current.keyboard.press(params.keys);
      break;
    case "scroll":
      await current.mouse.wheel(params.delta_x ?? 0, params.delta_y ?? 0);
      break;
    case "submit":
      await target.evaluate((element) => (element.form ?? element).requestSubmit());
      break;
    case "go_back":
      await current.goBack({ timeout });
      break;
    case "go_forward":
      await current.goForward({ timeout });
      break;
    case "close":
      await current.close();
      current = context.pages()[0] ?? (await context.newPage());
      break;
    default:
      // done, switch (the benchmark chooses the tab), upload_file (the recording has no file content).
      break;
  }
  await current.waitForLoadState("load", { timeout }).catch(() => {});
}

process.stdout.on("error", () => process.exit(1));
const say = (message) => process.stdout.write(JSON.stringify(message) + "\n");
say({ ready: { playwright: playwrightVersion, browser: browser.version() } });

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  if (command.close) break;
  try {
    if (command.step) {
      await step(command.step, command.timeoutMs);
      say({ ok: true });
    } else if (command.pages) {
      const pages = context.pages();
      say({ urls: pages.map((page) => page.url()), current: pages.indexOf(current) });
    } else if (command.use !== undefined) {
      current = context.pages()[command.use];
      await current.bringToFront();
      say({ ok: true });
    } else if (command.html) {
      say({ html: await current.evaluate(() => document.documentElement.outerHTML) });
    }
  } catch (error) {
    say({ error: String(error?.message ?? error).split("\n")[0] });
  }
}
await browser.close();
say({ closed: true });
