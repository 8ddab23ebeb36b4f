// Bootstrap of the popup: loads the Rust module, which renders the UI. JavaScript only because an extension
// page starts its code from a script file.
import init, { popup_main } from "./pkg/trace_extension.js";

init().then(() => popup_main());
