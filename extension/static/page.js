// Bootstrap of the extension's pages (popup, review, journeys): loads the Rust module, which renders the
// page its <body data-page> names. JavaScript only because an extension page starts its code from a script
// file.
import init, { page_main } from "./pkg/trace_extension.js";

init().then(() => page_main(document.body.dataset.page));
