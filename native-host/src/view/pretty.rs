//! HTML made readable for the network panel: one element per line, indented by nesting, the whitespace
//! between elements dropped; what is inside `<pre>`, `<textarea>`, `<script>` and `<style>` is left as
//! it was. Only for reading: the result is shown as text, never rendered.
//!
//! Elements whose end tag HTML lets a page leave out (`<p>`, `<li>`, table cells, ...) do not indent what
//! follows them: the rewriter sees no end for an implied one, and counting it would indent the rest of the
//! page ever deeper.

use std::cell::Cell;
use std::rc::Rc;

use lol_html::html_content::ContentType;
use lol_html::{RewriteStrSettings, element, end_tag, rewrite_str, text};

/// Deeper nesting is shown at this depth.
const MAX_INDENT: usize = 32;

/// Elements whose end tag may be left out.
const OPTIONAL_END: &[&str] = &[
    "p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot", "option", "optgroup", "colgroup", "caption",
    "rb", "rt", "rp", "rtc",
];
/// Elements whose text is kept exactly.
const VERBATIM: &[&str] = &["pre", "textarea", "script", "style"];

/// `html` indented, or `None` when it cannot be read as HTML.
pub fn html(html: &str) -> Option<String> {
    let depth = Rc::new(Cell::new(0usize));
    // Inside an element whose text is kept exactly: no line breaks are added there.
    let verbatim = Rc::new(Cell::new(0usize));
    let indent = |depth: usize| format!("\n{}", "  ".repeat(depth.min(MAX_INDENT)));
    let pretty = rewrite_str(
        html,
        RewriteStrSettings {
            element_content_handlers: vec![
                element!("*", |el| {
                    if verbatim.get() > 0 {
                        return Ok(());
                    }
                    let name = el.tag_name();
                    el.before(&indent(depth.get()), ContentType::Html);
                    if !el.can_have_content() || OPTIONAL_END.contains(&name.as_str()) {
                        return Ok(());
                    }
                    if VERBATIM.contains(&name.as_str()) {
                        verbatim.set(1);
                        let verbatim = verbatim.clone();
                        return el.on_end_tag(end_tag!(move |_end| {
                            verbatim.set(0);
                            Ok(())
                        }));
                    }
                    depth.set(depth.get() + 1);
                    let depth = depth.clone();
                    el.on_end_tag(end_tag!(move |end| {
                        let inner = depth.get().saturating_sub(1);
                        depth.set(inner);
                        end.before(&format!("\n{}", "  ".repeat(inner.min(MAX_INDENT))), ContentType::Html);
                        Ok(())
                    }))
                }),
                text!("*", |chunk| {
                    if verbatim.get() == 0 && chunk.as_str().trim().is_empty() {
                        chunk.remove();
                    }
                    Ok(())
                }),
            ],
            ..RewriteStrSettings::new()
        },
    )
    .ok()?;
    Some(pretty.trim_start().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_indented_by_nesting_and_verbatim_text_is_kept() {
        let page = "<!DOCTYPE html><html><head><title>Shop</title><style>a { color: red }\n  b {}</style></head>\
                    <body>  <ul><li>One<li>Two</ul><pre>a\n  b</pre><p>Text <b>bold</b></p><img src=x></body></html>";
        assert_eq!(
            html(page).unwrap(),
            "<!DOCTYPE html>\n<html>\n  <head>\n    <title>Shop\n    </title>\n    <style>a { color: red }\n  b {}</style>\
             \n  </head>\n  <body>\n    <ul>\n      <li>One\n      <li>Two\n    </ul>\n    <pre>a\n  b</pre>\
             \n    <p>Text \n    <b>bold\n    </b></p>\n    <img src=x>\n  </body>\n</html>"
        );
    }
}
