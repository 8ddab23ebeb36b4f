//! The progress bar of a long command run by hand (`export`, `dataset`): drawn on the terminal when asked,
//! hidden otherwise (a script, `--json`), in one look for every command.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `total` units drawn with `template` (indicatif's: `{bar:30}`, `{pos}`, `{bytes}`, …), or a
/// hidden one when `visible` is false.
pub fn bar(total: u64, visible: bool, template: &str) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(template).expect("the templates are written here, valid");
    ProgressBar::new(total).with_style(style.progress_chars("=> "))
}
