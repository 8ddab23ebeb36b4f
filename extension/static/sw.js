// Bootstrap of the service worker. JavaScript only because Chrome starts a service worker from a script:
// it loads the Rust module (wasm-bindgen output) and hands over to it. Listeners that Chrome must see at
// startup are registered here, synchronously, and forward to Rust once it is ready.
import init, * as trace from "./pkg/trace_extension.js";

const ready = init().then(() => {
  trace.service_worker_start();
  return trace;
});

chrome.runtime.onMessage.addListener((message, _sender, sendResponse) => {
  ready.then((rust) => rust.on_runtime_message(message)).then(sendResponse);
  return true; // the answer comes asynchronously
});

chrome.debugger.onEvent.addListener((source, method, params) => {
  // A body's arrival without its data (the data comes only for a body being streamed) tells the recorder
  // nothing, and there is one per piece of every body: dropped here, before it costs a crossing into Rust.
  if (method === "Network.dataReceived" && params?.data === undefined) return;
  ready.then((rust) => rust.on_debugger_event(source, method, params ?? {}));
});

chrome.debugger.onDetach.addListener((source, reason) => {
  ready.then((rust) => rust.on_debugger_detached(source, reason));
});

chrome.tabs.onCreated.addListener((tab) => {
  ready.then((rust) => rust.on_tab_created(tab));
});

chrome.tabs.onActivated.addListener(({ tabId }) => {
  ready.then((rust) => rust.on_tab_activated(tabId));
});

chrome.tabs.onRemoved.addListener((tabId) => {
  ready.then((rust) => rust.on_tab_removed(tabId));
});

chrome.webNavigation.onCommitted.addListener((details) => {
  ready.then((rust) => rust.on_navigation_committed(details));
});

// Navigations inside the document (`history.pushState`, `replaceState`, a fragment): where a single-page
// app goes, and where a page that rewrites its own URL ends up.
chrome.webNavigation.onHistoryStateUpdated.addListener((details) => {
  ready.then((rust) => rust.on_same_document_navigation(details));
});

chrome.webNavigation.onReferenceFragmentUpdated.addListener((details) => {
  ready.then((rust) => rust.on_same_document_navigation(details));
});
