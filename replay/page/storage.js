// Puts back the local and session storage the recording started with, before the page's own scripts run.
// JavaScript because it must run inside the page at document start; `trace-replay` fills in the entries
// (origin → key → value). A key the page has since set or removed itself is left alone: storage is restored
// once per origin and tab, which the marker in session storage remembers.
(() => {
  const LOCAL = __TRACE_LOCAL_STORAGE__;
  const SESSION = __TRACE_SESSION_STORAGE__;
  const MARKER = "__trace_replay_restored__";
  try {
    if (sessionStorage.getItem(MARKER)) return;
    for (const [key, value] of Object.entries(LOCAL[location.origin] || {})) localStorage.setItem(key, value);
    for (const [key, value] of Object.entries(SESSION[location.origin] || {})) sessionStorage.setItem(key, value);
    sessionStorage.setItem(MARKER, "1");
  } catch {
    // Storage is not available to this document (an opaque origin, a sandboxed frame): nothing to restore.
  }
})();
