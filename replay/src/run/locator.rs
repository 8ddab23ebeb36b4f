//! Finding a call's element in the replayed page, and acting on it there: by the recorded CSS selector,
//! then by XPath, then, inside an iframe of another origin (which the page cannot search), by the recorded
//! position within it; waiting for the element to be there, visible and still. The searching runs in the
//! page (`page/elements.js`); this module waits, and reads what it found.

use std::time::{Duration, Instant};

use super::POLL;
use super::input::Input;
use anyhow::{Context, Result, bail};
use chromiumoxide::Page;
use serde_json::json;
use trace_manifest::event::ElementDescriptor;
use trace_manifest::report::LocatedBy;
use trace_manifest::trajectory::ToolCall;

/// The page's side of finding and acting on elements: an expression giving `locate` and `act`.
const ELEMENTS: &str = include_str!("../../page/elements.js");

/// What [`Locator::in_element`] does to an element: the name of one of `page/elements.js`'s actions.
#[derive(Debug, Clone, Copy)]
pub(super) enum ElementAction {
    /// Reads a field's value as the recorder reads it: a rich editor's text, or a form field's value; `null`
    /// for anything else.
    FieldValue,
    /// Sets a field's value as its own widget does, with the events that follow (the argument).
    SetValue,
    /// Chooses the options the argument names (`"a, b"`); `true` when one was there.
    SelectOptions,
    /// Chooses the first option not among those the argument names; `false` when there is none.
    SelectAnotherOption,
    /// Submits a form as its submit button does.
    Submit,
    Focus,
}

impl ElementAction {
    fn name(self) -> &'static str {
        match self {
            ElementAction::FieldValue => "fieldValue",
            ElementAction::SetValue => "setValue",
            ElementAction::SelectOptions => "selectOptions",
            ElementAction::SelectAnotherOption => "selectAnotherOption",
            ElementAction::Submit => "submit",
            ElementAction::Focus => "focus",
        }
    }
}

/// An expression calling `page/elements.js`'s `function` with `arguments`, each written as JSON: a JSON
/// value is a JavaScript literal, so nothing recorded can become code.
fn elements_call(function: &str, arguments: &[serde_json::Value]) -> String {
    let arguments: Vec<String> = arguments.iter().map(serde_json::Value::to_string).collect();
    format!("({ELEMENTS}).{function}({})", arguments.join(", "))
}

/// The page's search for `target`'s element (`locate` in `page/elements.js`), scrolling it into view
/// unless `stay`: what it found, as a [`Sighting`] reads it.
fn locate_expression(target: &ElementDescriptor, stay: bool) -> String {
    elements_call("locate", &[json!(target.frame_path), json!(target.selector), json!(target.xpath), json!(stay)])
}

/// Where an element is, in the tab's viewport: its centre, and its size where it was seen.
pub(super) struct Located {
    pub(super) x: f64,
    pub(super) y: f64,
    pub(super) size: Option<(f64, f64)>,
    pub(super) by: LocatedBy,
}

impl Located {
    /// The point `offset` from its top left corner inside the element, kept a pixel inside its box; its
    /// centre when the offset or its size is not known.
    pub(super) fn point_at(&self, offset: Option<(f64, f64)>) -> (f64, f64) {
        match (self.size, offset) {
            (Some((width, height)), Some(offset)) if width >= 2.0 && height >= 2.0 => (
                self.x - width / 2.0 + offset.0.clamp(1.0, width - 1.0),
                self.y - height / 2.0 + offset.1.clamp(1.0, height - 1.0),
            ),
            _ => (self.x, self.y),
        }
    }
}

/// What one look for an element found.
#[derive(Debug, PartialEq)]
enum Sighting {
    /// There, with its centre and size in the tab's viewport, and whether it can be seen.
    Element {
        x: f64,
        y: f64,
        width: f64,
        height: f64,
        visible: bool,
        by: LocatedBy,
    },
    /// Inside an iframe of another origin, whose content the page cannot search: that iframe's offset.
    CrossOrigin {
        left: f64,
        top: f64,
    },
    Missing {
        reason: String,
    },
}

/// Finds elements in one tab, waiting at most `timeout` for each.
pub(super) struct Locator<'p> {
    pub(super) page: &'p Page,
    pub(super) timeout: Duration,
}

impl Locator<'_> {
    /// Finds the call's element and scrolls it into view: by selector, by XPath, or, inside an iframe of
    /// another origin, by its recorded position in that frame. Waits, at most the step timeout, for it to
    /// be there, visible and still; one there but never visible is acted on at the timeout all the same.
    pub(super) async fn locate(&self, call: &ToolCall) -> Result<Located> {
        self.locate_element(call.target.as_ref().context("the call names no element")?, false).await
    }

    /// [`Locator::locate`] for any element the recording describes, scrolled into view unless `stay`.
    pub(super) async fn locate_element(&self, target: &ElementDescriptor, stay: bool) -> Result<Located> {
        let expression = locate_expression(target, stay);
        let deadline = Instant::now() + self.timeout;
        let mut previous: Option<Sighting> = None;
        loop {
            let found = self.page.evaluate(expression.as_str()).await?.into_value::<serde_json::Value>()?;
            let sighting = Sighting::of(&found);
            let timed_out = Instant::now() >= deadline;
            match &sighting {
                Sighting::Element { x, y, width, height, visible, by }
                    if (*visible && previous.as_ref() == Some(&sighting)) || timed_out =>
                {
                    return Ok(Located { x: *x, y: *y, size: Some((*width, *height)), by: *by });
                }
                Sighting::CrossOrigin { left, top } => {
                    let bbox = target
                        .bbox
                        .as_ref()
                        .context("an element in an iframe of another origin has no recorded box")?;
                    return Ok(Located {
                        x: left + bbox.x + bbox.width / 2.0,
                        y: top + bbox.y + bbox.height / 2.0,
                        size: Some((bbox.width, bbox.height)),
                        by: LocatedBy::Position,
                    });
                }
                Sighting::Missing { reason } if timed_out => {
                    bail!("{} is not on the page after {:?} ({reason})", target.selector, self.timeout)
                }
                _ => {}
            }
            previous = Some(sighting);
            tokio::time::sleep(POLL).await;
        }
    }

    /// Focuses the call's element (for keys).
    pub(super) async fn focus(&self, call: &ToolCall) -> Result<LocatedBy> {
        match self.in_element(call, ElementAction::Focus, json!(null)).await {
            Ok(_) => Ok(LocatedBy::Selector),
            Err(_) => {
                let located = self.locate(call).await?;
                Input(self.page).mouse_click(located.x, located.y, 1).await?;
                Ok(located.by)
            }
        }
    }

    /// Runs `action` with `argument` on the call's element, found by selector or XPath, waiting at
    /// most the step timeout for it to be there.
    pub(super) async fn in_element(
        &self,
        call: &ToolCall,
        action: ElementAction,
        argument: serde_json::Value,
    ) -> Result<serde_json::Value> {
        let target = call.target.as_ref().context("the call names no element")?;
        let expression = elements_call(
            "act",
            &[json!(action.name()), argument, json!(target.frame_path), json!(target.selector), json!(target.xpath)],
        );
        let deadline = Instant::now() + self.timeout;
        loop {
            let result = self.page.evaluate(expression.as_str()).await?.into_value::<serde_json::Value>()?;
            if result["missing"] != true {
                return Ok(result["value"].clone());
            }
            if Instant::now() >= deadline {
                bail!("{} is not on the page after {:?}", target.selector, self.timeout);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Sighting {
    /// What [`locate_expression`] returned.
    fn of(found: &serde_json::Value) -> Sighting {
        if let (Some(x), Some(y)) = (found["x"].as_f64(), found["y"].as_f64()) {
            return Sighting::Element {
                x,
                y,
                width: found["width"].as_f64().unwrap_or_default(),
                height: found["height"].as_f64().unwrap_or_default(),
                visible: found["visible"] == true,
                by: if found["by"] == "xpath" { LocatedBy::Xpath } else { LocatedBy::Selector },
            };
        }
        if found["cross_origin"] == true
            && let (Some(left), Some(top)) = (found["left"].as_f64(), found["top"].as_f64())
        {
            return Sighting::CrossOrigin { left, top };
        }
        Sighting::Missing { reason: found["error"].as_str().unwrap_or("not found").to_owned() }
    }
}
