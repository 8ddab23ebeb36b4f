// Bootstrap of the service worker. JavaScript only because Chrome starts a service worker from a script:
// it loads the Rust module (wasm-bindgen output) and hands over to it. Listeners that Chrome must see at
// startup are registered here, synchronously, and forward to Rust once it is ready.
import init, * as trace from "./pkg/trace_extension.js";

const ready = init().then(() => trace);

chrome.runtime.onInstalled.addListener(() => {
  ready.then((rust) => rust.on_installed());
});
