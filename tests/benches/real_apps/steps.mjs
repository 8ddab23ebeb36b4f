// The Playwright side of the `real_apps` benchmark (tests/benches/real_apps.rs): Debian's Chromium driven
// by Playwright, every request answered by `routeFromHAR` from an exported bundle, the demonstration's
// steps carried out the way a Playwright user writes them (locators that wait for their element, `fill`,
// `selectOption`, `keyboard.press`). Hand-written JavaScript because what is measured is Playwright's own
// HAR replay and its API is JavaScript. The Rust benchmark sends the steps and judges every step of both
// tools with the same rules; this script only acts and reports what the browser shows.
//
// Started as `node steps.mjs CONFIG_JSON` (see ../playwright.mjs, which also speaks for it; the
// configuration's `viewport` is the recording's), it answers these commands:
//   {"step": TOOL_CALL, "timeoutMs": N} → {"ok": true} or {"error": MESSAGE}
//   {"pages": true}                     → {"urls": [URL, ...], "current": INDEX}
//   {"use": INDEX}                      → {"ok": true}
//   {"html": true}                      → {"html": OUTER_HTML of the current page}

import { context, converse } from "../playwright.mjs";

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
    case "drag_drop":
      // A drag a page follows move by move (a palette's node onto a canvas, a wire between two ports): the
      // mouse pressed where the person pressed, moved with the button held, released where they released.
      // (`dragTo` drops on the middle of the target's box, which for a canvas is far from where they did.)
      await target.waitFor({ state: "visible", timeout });
      await current.mouse.move(params.coord_source_x, params.coord_source_y);
      await current.mouse.down();
      await current.mouse.move(params.coord_target_x, params.coord_target_y, { steps: Math.max(params.steps ?? 10, 5) });
      await current.mouse.up();
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

// Playwright's messages go on with a call log: the first line says what failed.
await converse(async (command) => {
  if (command.step) {
    await step(command.step, command.timeoutMs);
    return { ok: true };
  } else if (command.pages) {
    const pages = context.pages();
    return { urls: pages.map((page) => page.url()), current: pages.indexOf(current) };
  } else if (command.use !== undefined) {
    current = context.pages()[command.use];
    await current.bringToFront();
    return { ok: true };
  } else if (command.html) {
    return { html: await current.evaluate(() => document.documentElement.outerHTML) };
  }
  throw new Error(`unknown command ${JSON.stringify(command)}`);
}, (error) => String(error?.message ?? error).split("\n")[0]);
