//! Which values of a bundle are secrets, and the forms a secret takes in it. The one list of secret names
//! ([`is_secret_name`]) and the one list of encoded forms ([`encoded_forms`]) live here: the trajectory
//! scrubs with them, checkpoints leave secret fields out by them, and redaction replaces and searches by
//! them. (The in-page capture script is given the names when its text is built, `trace_capture::actions`.)
//!
//! Two sources of secrets: what the person typed into credential fields (as [`crate::trajectory`] finds
//! them), and the session secrets the recording carries: every cookie value but plain words,
//! `Authorization` and other token-bearing headers, secret-named URL parameters, form fields, JSON fields,
//! hidden inputs and storage entries, and secrets told by their shape ([`SECRET_SHAPES`]: JSON Web Tokens,
//! keys of common services) wherever they appear in text.
//!
//! Finding is by structure, by name and by known shapes only, so it is predictable: a value is a secret
//! because of where it is or what format it has, never because it "looks random". Bodies are read every
//! way they parse (JSON, form, multipart), whatever their content type says: jQuery sends JSON as a form,
//! `fetch` sends forms as `text/plain`. Replacing the values everywhere is the exporter's job, by
//! [`encoded_forms`] and [`encoded_pattern`]; [`values_to_check`] chooses, by other means, what its final
//! search of the written zip looks for.
//!
//! A value cannot be replaced everywhere when it is too short to tell apart from ordinary text, a word of
//! the web's or the bundle's own formats (`text`, `name`, `json`), or a word the recording's addresses
//! use: its placeholder would land in `text/plain`, in the HAR's field names, in `/account`. What happens
//! then depends on who chose it ([`Kept`]):
//! - typed into a credential field: [`Secrets::find`] refuses the export, naming the field, for the
//!   person chose that value and can record again with another;
//! - anything else (a cookie, a header, a parameter, field or storage entry chosen by its name): the value
//!   is left as it is and listed, by kind and name, in [`Secrets::kept`]. A rule of names is broad
//!   (`sort_key` says `key`), and what it chose is a secret only if it looks like one: a value chosen by
//!   name alone that is a plain word or a small number (`sort_key=price`, `pin_length=6`) is kept and
//!   listed too. Refusing those would refuse almost every real recording, for values nobody could misuse;
//!   and a cookie of 1 to 3 characters or a plain word under an innocent name (`lang=en`, `theme=dark`) is
//!   listed the same way rather than skipped silently.
//!
//! # Layout
//! - [`names`]: which names and words say a value is a secret, or cannot be one.
//! - `finding`: [`Secrets`], the search of a bundle (its HAR, bodies, frames, pages and storage).
//! - `encodings`: the forms a secret takes in a bundle ([`encoded_forms`], [`encoded_pattern`]).

mod encodings;
mod finding;
pub mod names;

pub use encodings::{EncodedForm, EncodedPattern, encoded_forms, encoded_pattern};
pub use finding::{Kept, KeptReason, SECRET_SHAPES, Secret, Secrets};
#[cfg(feature = "native")]
pub use finding::{frame_text, request_body_text, values_to_check};
pub use names::{
    COMMON_WORDS, SECRET_NAME_COMPOUNDS, SECRET_NAME_CONTAINED, SECRET_NAME_WHOLE, is_plain_word, is_secret_name,
};

/// Shorter values cannot be told apart from ordinary text: replacing them everywhere would damage the
/// bundle, and searching for them would find them by chance.
pub const MIN_SECRET_CHARS: usize = 4;
/// How every placeholder starts.
pub const PLACEHOLDER_PREFIX: &str = "trace-redacted-";
