//! The mouse and the keyboard of the re-run, as DevTools' input events: clicks, drags, typing a key at a
//! time as a person does, and key combinations (`Control+a`) with their modifiers.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchDragEventParams, DispatchDragEventType, DispatchKeyEventParams, DispatchKeyEventType,
    DispatchMouseEventParams, DispatchMouseEventType, EventDragIntercepted, InsertTextParams, MouseButton,
    SetInterceptDragsParams,
};
use futures::StreamExt;

/// The mouse and the keyboard of one tab.
pub(super) struct Input<'p>(pub(super) &'p Page);

impl Input<'_> {
    pub(super) async fn mouse_click(&self, x: f64, y: f64, click_count: i64) -> Result<()> {
        self.mouse_click_with(x, y, click_count, 0).await
    }

    /// A click with `modifiers` held (DevTools' bit mask, see [`modifier_mask`]).
    pub(super) async fn mouse_click_with(&self, x: f64, y: f64, click_count: i64, modifiers: i64) -> Result<()> {
        let page = self.0;
        let event = |kind| {
            DispatchMouseEventParams::builder()
                .r#type(kind)
                .x(x)
                .y(y)
                .button(MouseButton::Left)
                .click_count(click_count)
                .modifiers(modifiers)
                .build()
                .map_err(anyhow::Error::msg)
        };
        page.execute(event(DispatchMouseEventType::MouseMoved)?).await?;
        page.execute(event(DispatchMouseEventType::MousePressed)?).await?;
        page.execute(event(DispatchMouseEventType::MouseReleased)?).await?;
        Ok(())
    }

    /// Drags from `from` to `to` (points in the tab's viewport) as a person does: a press, `steps` moves with
    /// the button held, a release. A page that starts the browser's own drag and drop (`draggable`
    /// elements) is given its drop through DevTools' drag events, as the pointer alone cannot.
    pub(super) async fn drag(&self, from: (f64, f64), to: (f64, f64), steps: u32) -> Result<()> {
        let page = self.0;
        let mouse = |kind, (x, y): (f64, f64), buttons: i64| {
            DispatchMouseEventParams::builder()
                .r#type(kind)
                .x(x)
                .y(y)
                .button(MouseButton::Left)
                .buttons(buttons)
                .click_count(1)
                .build()
                .map_err(anyhow::Error::msg)
        };
        let mut intercepted = page.event_listener::<EventDragIntercepted>().await?;
        page.execute(SetInterceptDragsParams::new(true)).await?;
        page.execute(mouse(DispatchMouseEventType::MouseMoved, from, 0)?).await?;
        page.execute(mouse(DispatchMouseEventType::MousePressed, from, 1)?).await?;
        let steps = steps.clamp(5, 30);
        for step in 1..=steps {
            let along = f64::from(step) / f64::from(steps);
            let at = (from.0 + (to.0 - from.0) * along, from.1 + (to.1 - from.1) * along);
            page.execute(mouse(DispatchMouseEventType::MouseMoved, at, 1)?).await?;
            tokio::time::sleep(Duration::from_millis(16)).await;
        }
        // The browser's own drag, if the page started one, is handed over here rather than to the pointer.
        if let Ok(Some(drag)) = tokio::time::timeout(Duration::from_millis(50), intercepted.next()).await {
            for kind in [DispatchDragEventType::DragEnter, DispatchDragEventType::DragOver, DispatchDragEventType::Drop]
            {
                let event = DispatchDragEventParams::new(kind, to.0, to.1, drag.data.clone());
                page.execute(event).await?;
            }
        }
        page.execute(mouse(DispatchMouseEventType::MouseReleased, to, 0)?).await?;
        page.execute(SetInterceptDragsParams::new(false)).await?;
        Ok(())
    }

    /// Types `text` as a person does, a key at a time, `interval` apart, so that pages listening for keys
    /// (a filter that runs on `keyup`, an editor) see the typing; a character no key makes is inserted as
    /// text.
    pub(super) async fn type_text(&self, text: &str, interval: Duration) -> Result<()> {
        let page = self.0;
        let mut buffer = [0u8; 4];
        for (index, character) in text.chars().enumerate() {
            if index > 0 && !interval.is_zero() {
                tokio::time::sleep(interval).await;
            }
            let key = if character == '\n' { "Enter" } else { character.encode_utf8(&mut buffer) };
            match chromiumoxide::keys::get_key_definition(key) {
                Some(definition) => {
                    let text = if character == '\n' { "\r" } else { key };
                    let down = DispatchKeyEventParams::builder()
                        .r#type(DispatchKeyEventType::KeyDown)
                        .key(definition.key)
                        .code(definition.code)
                        .windows_virtual_key_code(definition.key_code)
                        .native_virtual_key_code(definition.key_code)
                        .text(text);
                    let up = down.clone().r#type(DispatchKeyEventType::KeyUp).build().map_err(anyhow::Error::msg)?;
                    page.execute(down.build().map_err(anyhow::Error::msg)?).await?;
                    page.execute(up).await?;
                }
                None => {
                    page.execute(InsertTextParams::new(key)).await?;
                }
            }
        }
        Ok(())
    }

    /// Presses `key` with `modifiers` (DevTools' bit mask: Alt 1, Control 2, Meta 4, Shift 8).
    pub(super) async fn key(&self, key: &str, modifiers: i64, commands: &[&str]) -> Result<()> {
        let definition =
            chromiumoxide::keys::get_key_definition(key).with_context(|| format!("unknown key {key:?}"))?;
        let mut down = DispatchKeyEventParams::builder()
            .key(definition.key)
            .code(definition.code)
            .windows_virtual_key_code(definition.key_code)
            .native_virtual_key_code(definition.key_code)
            .modifiers(modifiers);
        for command in commands {
            down = down.command(*command);
        }
        let text = definition.text.or((definition.key.len() == 1).then_some(definition.key));
        let kind = match text {
            Some(text) if modifiers & 0b111 == 0 => {
                down = down.text(text);
                DispatchKeyEventType::KeyDown
            }
            _ => DispatchKeyEventType::RawKeyDown,
        };
        let up = down.clone().r#type(DispatchKeyEventType::KeyUp).build().map_err(anyhow::Error::msg)?;
        let page = self.0;
        page.execute(down.r#type(kind).build().map_err(anyhow::Error::msg)?).await?;
        page.execute(up).await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(())
    }
}

/// `Control+a` → (Control's bit, "a").
pub(super) fn parse_keys(keys: &str) -> Result<(i64, &str)> {
    let mut parts: Vec<&str> = keys.split('+').collect();
    // "Control++" presses "+".
    if keys.ends_with("++") {
        parts.truncate(parts.len() - 2);
        parts.push("+");
    }
    let key = parts.pop().filter(|k| !k.is_empty()).with_context(|| format!("no key in {keys:?}"))?;
    let modifiers = modifier_mask(parts).with_context(|| format!("in {keys:?}"))?;
    Ok((modifiers, key))
}

/// Modifier names as DevTools' bit mask: Alt 1, Control 2, Meta 4, Shift 8.
pub(super) fn modifier_mask<'m>(names: impl IntoIterator<Item = &'m str>) -> Result<i64> {
    let mut mask = 0;
    for name in names {
        mask |= match name {
            "Alt" => 1,
            "Control" => 2,
            "Meta" => 4,
            "Shift" => 8,
            other => bail!("unknown modifier {other:?}"),
        };
    }
    Ok(mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_into_modifiers_and_a_key() {
        assert_eq!(parse_keys("Enter").unwrap(), (0, "Enter"));
        assert_eq!(parse_keys("Control+a").unwrap(), (2, "a"));
        assert_eq!(parse_keys("Control+Shift+Tab").unwrap(), (10, "Tab"));
        assert_eq!(parse_keys("Control++").unwrap(), (2, "+"));
        assert!(parse_keys("Hyper+x").is_err());
    }
}
