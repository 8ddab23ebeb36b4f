// Puts back the local and session storage the recording started with, before the page's own scripts run.
// JavaScript because it must run inside the page at document start; `trace-replay` fills in the entries
// (origin → key → value). Restoring happens once: local storage once per origin for the whole browser (all
// tabs share it), session storage once per origin and tab. After that the page's own changes stand. The
// markers that remember it are visible to the page under the name below.
(() => {
  const LOCAL = __TRACE_LOCAL_STORAGE__;
  const SESSION = __TRACE_SESSION_STORAGE__;
  const MARKER = "__trace_replay_restored__";
  const restore = (storage, entries) => {
    if (storage.getItem(MARKER)) return;
    for (const [key, value] of Object.entries(entries[location.origin] || {})) storage.setItem(key, value);
    storage.setItem(MARKER, "1");
  };
  try {
    restore(localStorage, LOCAL);
    restore(sessionStorage, SESSION);
  } catch {
    // Storage is not available to this document (an opaque origin, a sandboxed frame): nothing to restore.
  }
})();
