//! How a person acts on the real applications, at a person's pace: the pauses they make (before typing into
//! a box they just clicked, after nudging a control, while an editor autosaves), keys pressed one at a time
//! with the gaps of a hand on a keyboard, and a drag with the mouse held down through several moves. The
//! re-run of a recording keeps what it can read of these pauses; a demonstration scripted faster than any
//! person measures races no one meets.

use std::time::Duration;

use anyhow::{Context, Result};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::input::{DispatchMouseEventParams, DispatchMouseEventType, MouseButton};

/// Between two characters a person types: about eight keys a second.
pub const KEY_GAP: Duration = Duration::from_millis(120);
/// Between two presses of an arrow key nudging a control.
pub const ARROW_GAP: Duration = Duration::from_millis(220);

/// A laptop's window, in CSS pixels: what a person edits a canvas in (the recording browser's own is
/// 800 × 600, where an editor's sidebars leave the canvas a strip).
pub const LAPTOP_WINDOW: (i64, i64) = (1280, 800);

/// Makes the page's window [`LAPTOP_WINDOW`], as a person gives an editor room before working in it; the
/// recorder records the new viewport, and the re-run lays the page out at it.
pub async fn widen_window(page: &Page) -> Result<()> {
    let (width, height) = LAPTOP_WINDOW;
    page.execute(SetDeviceMetricsOverrideParams::new(width, height, 1.0, false)).await?;
    Ok(())
}

/// A person's pause of `ms` milliseconds.
pub async fn pause(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Types `text` into whatever has the focus, one key at a time, [`KEY_GAP`] apart.
pub async fn type_keys(page: &Page, text: &str) -> Result<()> {
    let keyboard = keyboard(page).await?;
    for (index, character) in text.chars().enumerate() {
        if index > 0 {
            tokio::time::sleep(KEY_GAP).await;
        }
        keyboard.type_str(character.to_string()).await.with_context(|| format!("cannot type {character:?}"))?;
    }
    Ok(())
}

/// Presses `key` (`ArrowRight`, ...) `times` times in whatever has the focus, [`ARROW_GAP`] apart.
pub async fn press_times(page: &Page, key: &str, times: usize) -> Result<()> {
    let keyboard = keyboard(page).await?;
    for press in 0..times {
        if press > 0 {
            tokio::time::sleep(ARROW_GAP).await;
        }
        keyboard.press_key(key).await.with_context(|| format!("cannot press {key}"))?;
    }
    Ok(())
}

/// A handle that sends keys to the page's focused element without moving the focus (chromiumoxide types
/// through an element; its key events go to the page, where the focus is).
async fn keyboard(page: &Page) -> Result<chromiumoxide::Element> {
    page.find_element("html").await.context("the page has no document to type into")
}

/// The middle of the element `selector`, in the page's coordinates, scrolled into view.
pub async fn middle_of(page: &Page, selector: &str) -> Result<(f64, f64)> {
    let element = page.find_element(selector).await.with_context(|| format!("no {selector}"))?;
    element.scroll_into_view().await?;
    let point = element.clickable_point().await.with_context(|| format!("{selector} has no point to press"))?;
    Ok((point.x, point.y))
}

/// Drags with the left button from `from` to `to` as a hand does: the mouse moved onto the start, pressed,
/// moved in `moves` steps (a drag library starts dragging only once the pointer has travelled a few pixels,
/// and follows each move), held still a moment over the target, and released there.
pub async fn drag(page: &Page, from: (f64, f64), to: (f64, f64), moves: u32) -> Result<()> {
    // `buttons` says which buttons are held during the event (1: the left one), as a real mouse reports it.
    let mouse = |kind: DispatchMouseEventType, (x, y): (f64, f64), buttons: i64| {
        let pressing = matches!(kind, DispatchMouseEventType::MousePressed | DispatchMouseEventType::MouseReleased);
        let mut event = DispatchMouseEventParams::builder().r#type(kind).x(x).y(y).buttons(buttons);
        if pressing {
            event = event.button(MouseButton::Left).click_count(1);
        } else if buttons != 0 {
            event = event.button(MouseButton::Left);
        }
        event.build().map_err(anyhow::Error::msg)
    };
    page.execute(mouse(DispatchMouseEventType::MouseMoved, from, 0)?).await?;
    pause(150).await;
    page.execute(mouse(DispatchMouseEventType::MousePressed, from, 1)?).await?;
    pause(200).await;
    for step in 1..=moves {
        let share = f64::from(step) / f64::from(moves);
        let point = (from.0 + (to.0 - from.0) * share, from.1 + (to.1 - from.1) * share);
        page.execute(mouse(DispatchMouseEventType::MouseMoved, point, 1)?).await?;
        pause(40).await;
    }
    pause(250).await;
    page.execute(mouse(DispatchMouseEventType::MouseReleased, to, 0)?).await?;
    Ok(())
}
