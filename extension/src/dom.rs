//! The few DOM helpers the extension's pages share: finding an element by id, reading a field's value,
//! setting text (always as text, never as markup: what is shown may come from a stranger's campaign or a
//! web page's title), hiding, and making elements.

use wasm_bindgen::prelude::*;
use web_sys::{Document, Element, HtmlElement, HtmlInputElement, HtmlSelectElement, HtmlTextAreaElement};

pub fn document() -> Option<Document> {
    web_sys::window()?.document()
}

pub fn element(id: &str) -> Option<web_sys::Element> {
    web_sys::window()?.document()?.get_element_by_id(id)
}

pub fn value(id: &str) -> String {
    let Some(element) = element(id) else { return String::new() };
    if let Some(input) = element.dyn_ref::<HtmlInputElement>() {
        input.value()
    } else if let Some(select) = element.dyn_ref::<HtmlSelectElement>() {
        select.value()
    } else if let Some(text) = element.dyn_ref::<HtmlTextAreaElement>() {
        text.value()
    } else {
        String::new()
    }
}

pub fn set_text(id: &str, text: &str) {
    if let Some(element) = element(id) {
        element.set_text_content(Some(text));
    }
}

pub fn set_hidden(id: &str, hidden: bool) {
    if let Some(element) = element(id).and_then(|e| e.dyn_into::<HtmlElement>().ok()) {
        element.set_hidden(hidden);
    }
}

/// Sets a field's value (an input, a select or a text area).
pub fn set_value(id: &str, text: &str) {
    let Some(element) = element(id) else { return };
    if let Some(input) = element.dyn_ref::<HtmlInputElement>() {
        input.set_value(text);
    } else if let Some(select) = element.dyn_ref::<HtmlSelectElement>() {
        select.set_value(text);
    } else if let Some(area) = element.dyn_ref::<HtmlTextAreaElement>() {
        area.set_value(text);
    }
}

/// Makes a `tag` element with `attributes` and, if given, `text` as its text.
pub fn make(tag: &str, attributes: &[(&str, &str)], text: Option<&str>) -> Element {
    let element = document().and_then(|document| document.create_element(tag).ok()).expect("a page can make elements");
    for (name, value) in attributes {
        let _ = element.set_attribute(name, value);
    }
    if let Some(text) = text {
        element.set_text_content(Some(text));
    }
    element
}

/// Runs `action` on every click of `element` (for as long as the page lives).
pub fn on_click(element: &Element, action: impl FnMut() + 'static) {
    let handler = Closure::<dyn FnMut()>::new(action);
    let _ = element.add_event_listener_with_callback("click", handler.as_ref().unchecked_ref());
    handler.forget(); // lives as long as the page
}

/// Enables or disables a button (or any form control).
pub fn set_disabled(id: &str, disabled: bool) {
    if let Some(element) = element(id) {
        if disabled {
            let _ = element.set_attribute("disabled", "");
        } else {
            let _ = element.remove_attribute("disabled");
        }
    }
}

/// The value of the page's query parameter `name`.
pub fn query_parameter(name: &str) -> Option<String> {
    let search = web_sys::window()?.location().search().ok()?;
    let search = search.trim_start_matches('?');
    search.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then(|| js_sys::decode_uri_component(value).ok()?.as_string()).flatten()
    })
}
