// Tells the human re-run (`trace-replay run --human`) when a replayed page has done what its last act set
// off: the short timers that act armed (a debounce, an autosave, a throttled control's trailing send, and
// the timers those arm in turn) have fired, and the document has stopped changing. JavaScript because timers
// and mutations can only be seen from inside the page, and only by a script that runs before the page's own.
//
// The re-run calls `begin()` before it acts and `end()` once its input events have been dispatched; a timer
// of at most SHORT_MS armed in between, or by such a timer's callback (up to DEPTH generations), is waited
// for. Timers the page arms on its own (a poll, a clock) are not: they would keep a page from ever settling.
// Each frame of the page runs this script; the calls reach every same-origin frame below the one called.
(() => {
  const KEY = "__trace_replay_settle__";
  if (Object.prototype.hasOwnProperty.call(globalThis, KEY)) return;
  const SHORT_MS = 1000;
  const DEPTH = 3;
  const nativeSetTimeout = globalThis.setTimeout;
  const nativeClearTimeout = globalThis.clearTimeout;
  const now = () => performance.now();
  const pending = new Set();
  let acting = false;
  // The generation of the waited-for timer whose callback runs now, if one does.
  let generation = null;
  let lastChange = now();

  globalThis.setTimeout = function setTimeout(handler, delay, ...args) {
    const wanted = Number(delay) || 0;
    const depth = generation === null ? (acting ? 0 : null) : generation + 1;
    if (typeof handler !== "function" || wanted > SHORT_MS || depth === null || depth >= DEPTH) {
      return nativeSetTimeout(handler, delay, ...args);
    }
    const id = nativeSetTimeout(function () {
      pending.delete(id);
      const outer = generation;
      generation = depth;
      try {
        return handler.apply(this, arguments);
      } finally {
        generation = outer;
      }
    }, delay, ...args);
    pending.add(id);
    return id;
  };
  globalThis.clearTimeout = function clearTimeout(id) {
    pending.delete(id);
    return nativeClearTimeout(id);
  };

  if (typeof MutationObserver === "function" && typeof document === "object") {
    new MutationObserver(() => (lastChange = now())).observe(document, {
      subtree: true, childList: true, characterData: true, attributes: true,
    });
  }

  const own = {
    begin: () => (acting = true),
    end: () => (acting = false),
    state: () => ({ timers: pending.size, quiet_ms: now() - lastChange }),
  };
  // Every same-origin frame's own part, this one's first.
  const everyFrame = (visit) => {
    const walk = (view) => {
      try {
        const probe = view[KEY];
        if (probe) visit(probe.own);
        for (let i = 0; i < view.frames.length; i++) walk(view.frames[i]);
      } catch {
        // Another origin's frame: neither it nor what it holds can be reached.
      }
    };
    walk(globalThis);
  };
  Object.defineProperty(globalThis, KEY, {
    value: Object.freeze({
      own,
      begin: () => everyFrame((probe) => probe.begin()),
      end: () => everyFrame((probe) => probe.end()),
      // The timers still awaited in all frames, and how long the quietest-changing frame has been still.
      state: () => {
        const total = { timers: 0, quiet_ms: Infinity };
        everyFrame((probe) => {
          const state = probe.state();
          total.timers += state.timers;
          total.quiet_ms = Math.min(total.quiet_ms, state.quiet_ms);
        });
        return total;
      },
    }),
  });
})();
