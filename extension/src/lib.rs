//! The TRACE extension's Rust side, compiled to WebAssembly. For now it only proves the pipeline: the
//! service worker loads this module and it speaks the capture format of `trace-manifest`. Recording comes
//! with the extension proper.

pub mod network;
pub mod outbox;

use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console)]
    fn info(message: &str);
}

/// The capture format version this build writes.
#[wasm_bindgen]
pub fn format_version() -> u32 {
    trace_manifest::FORMAT_VERSION
}

/// Called by the service worker when the extension is installed or updated.
#[wasm_bindgen]
pub fn on_installed() {
    info(&format!(
        "TRACE recorder {} installed (capture format {}, native host {})",
        env!("CARGO_PKG_VERSION"),
        trace_manifest::FORMAT_VERSION,
        trace_manifest::HOST_NAME
    ));
}
