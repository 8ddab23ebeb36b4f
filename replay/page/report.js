// The proxy path's reporter: what the page shows, where it moved within its document, and the frames it
// sends on the recorded sockets, posted to the proxy, which records them in the episode's session as the
// DevTools path records them (a DOM snapshot when the page has loaded and whenever it settles after a
// change; a navigation within the document; each socket report as the DevTools binding would carry it).
// No DevTools session watches a browser the agent launched itself, so only a script in the page can see
// what the page's own scripts draw (a cart count after a `fetch`). It is JavaScript because it must run
// inside the page, before the page's own scripts, as the other page scripts do; the proxy bounds what it
// accepts, whatever a page posts.
(() => {
  const ENDPOINT = __TRACE_REPORT_PATH__;
  const SOCKET_BINDING = __TRACE_SOCKET_BINDING__;
  const REPORT_NOW = __TRACE_REPORT_NOW__;
  // A snapshot waits until the page has been quiet this long after a change...
  const QUIET_MS = 300;
  // ...but no longer than this after the first change it waits for (a page with a ticking clock never rests).
  const LONGEST_WAIT_MS = 2000;
  // A document larger than this is not reported (the proxy refuses it too).
  const MAX_CHARS = 4 << 20;
  // `keepalive` requests (the last snapshot, as the page goes) may carry at most 64 KiB.
  const KEEPALIVE_CHARS = 60000;

  // The page's own scripts may replace `fetch`: the browser's is kept before they run.
  const send = globalThis.fetch.bind(globalThis);
  const post = (report, keepalive) => {
    const body = JSON.stringify(report);
    return send(ENDPOINT, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      keepalive: keepalive && body.length <= KEEPALIVE_CHARS,
    }).then(
      () => {},
      () => {},
    );
  };

  // The recorded sockets (`websocket.js`) report through this name, a DevTools binding on the other path.
  globalThis[SOCKET_BINDING] = (message) => post({ kind: "socket", message }, false);

  // Only the top document is the page the person saw; a frame's document is part of it.
  if (window !== window.top) return;
  let last = "";
  // The latest report's post, which a harness awaits before it scores (below).
  let posted = Promise.resolve();
  let quiet;
  let longest;
  const snapshot = (leaving) => {
    clearTimeout(quiet);
    clearTimeout(longest);
    longest = undefined;
    const root = document.documentElement;
    if (!root) return posted;
    const html = (document.doctype ? "<!DOCTYPE html>" : "") + root.outerHTML;
    if (html === last || html.length > MAX_CHARS) return posted;
    last = html;
    posted = post({ kind: "shown", url: location.href, html }, leaving);
    return posted;
  };
  // A harness (BrowserGym's package) calls this before it scores: the page as it is now, reported, and a
  // promise that resolves once the proxy has it, so that no change waits out its quiet time unseen.
  globalThis[REPORT_NOW] = () => snapshot(false);

  // A page that changes its URL without loading a document (`history.pushState`, a fragment) has moved as
  // DevTools' `navigatedWithinDocument` says on the other path: the proxy sees no request for it. Told
  // synchronously, so that the proxy has it before any request the page sends after the change.
  let address = location.href;
  const moved = () => {
    if (location.href === address) return;
    address = location.href;
    try {
      const told = new XMLHttpRequest();
      told.open("POST", ENDPOINT, false);
      told.setRequestHeader("content-type", "application/json");
      told.send(JSON.stringify({ kind: "moved", url: address }));
    } catch {
      // A page that refuses it (a sandboxed frame) is not told of: the snapshots still carry its URL.
    }
  };
  for (const name of ["pushState", "replaceState"]) {
    const original = history[name];
    history[name] = function (...args) {
      const result = original.apply(this, args);
      moved();
      return result;
    };
  }
  addEventListener("popstate", moved);
  addEventListener("hashchange", moved);
  const changed = () => {
    clearTimeout(quiet);
    quiet = setTimeout(snapshot, QUIET_MS);
    if (longest === undefined) longest = setTimeout(snapshot, LONGEST_WAIT_MS);
  };
  const watch = () => {
    snapshot(false);
    new MutationObserver(changed).observe(document, {
      subtree: true,
      childList: true,
      characterData: true,
      attributes: true,
    });
  };
  if (document.readyState === "complete") watch();
  else addEventListener("load", watch, { once: true });
  addEventListener("pagehide", () => snapshot(true));
})();
