//! The credentials typed in a demonstration: each secret value given its placeholder
//! (`{{credentials.<site>.<field>}}`) in its call, and every encoded form of it scrubbed from the whole
//! trajectory as a second line of defence (the module's **Credentials** rule), by the forms
//! [`crate::secrets::encoded_forms`] lists.

use trace_manifest::event::{Action, ElementDescriptor, EventKind, EventRecord, header_value};
use trace_manifest::trajectory::{Credential, ToolAction, ToolCall};

use crate::secrets;

/// Letters, digits, `_` and `-`; anything else becomes `_`.
pub(super) fn sanitize_field(raw: &str) -> String {
    let field: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    if field.is_empty() { "field".to_owned() } else { field }
}

pub(super) fn site_of(page_url: &str) -> String {
    url::Url::parse(page_url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The field name of the credentials a browser sent for HTTP Basic authentication.
pub const HTTP_BASIC_FIELD: &str = "http_basic_auth";

/// The credentials the browser sent for HTTP Basic authentication (`Authorization: Basic`), as
/// `user:password`, one per site: what the person typed into the browser's own dialog, which no page saw
/// and no call of the trajectory holds. Replay authenticates the browser as the recording shows
/// (`trace_replay::matcher`); these are the task's credentials all the same, and redacted with them.
pub(super) fn http_basic(events: &[&EventRecord]) -> Vec<Credential> {
    use base64::Engine as _;
    let mut found: Vec<Credential> = Vec::new();
    for record in events {
        let EventKind::Request(request) = &record.event.kind else { continue };
        let Some(value) = header_value(&request.headers, "authorization") else { continue };
        let Some(encoded) = value.trim().strip_prefix("Basic ").or_else(|| value.trim().strip_prefix("basic ")) else {
            continue;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else { continue };
        let Ok(user_and_password) = String::from_utf8(decoded) else { continue };
        let site = site_of(&request.url);
        if user_and_password.contains(':') && !found.iter().any(|credential| credential.site == site) {
            let target = ElementDescriptor { tag: "http-basic-auth".to_owned(), ..ElementDescriptor::default() };
            found.push(Credential { site, field: HTTP_BASIC_FIELD.to_owned(), target, value: user_and_password });
        }
    }
    found
}

/// A secret typed into a field, until the derivation is over and it gets its placeholder.
#[derive(Debug, Clone)]
pub(super) struct Secret {
    pub(super) site: String,
    pub(super) field: String,
    pub(super) target: ElementDescriptor,
    pub(super) value: String,
    /// Values the field held before, merged away: scrubbed too, should they have reached a URL.
    pub(super) earlier_values: Vec<String>,
}

impl Secret {
    pub(super) fn of(action: &Action, target: &ElementDescriptor, value: &str) -> Secret {
        let raw_field = target.name.as_deref().or(target.id.as_deref()).unwrap_or_default();
        Secret {
            site: site_of(&action.url),
            field: sanitize_field(raw_field),
            target: target.clone(),
            value: value.to_owned(),
            earlier_values: Vec::new(),
        }
    }

    pub(super) fn replaced_by(self, mut newer: Secret) -> Secret {
        newer.earlier_values = self.earlier_values;
        newer.earlier_values.push(self.value);
        newer
    }
}

/// Gives every secret its placeholder (the same one for the same value in the same field, a numbered one
/// for a different value), puts the placeholder in the call it was typed in, and returns the credentials
/// and the strings to scrub from the whole trajectory, longest first.
///
/// The value typed last into a field is the field's credential, under the field's own name and listed
/// first; values typed into it before are numbered after it. A person who mistypes a password and types it
/// again has the one that worked last, and an agent that takes a site's password takes that one.
pub(super) fn register_secrets<'c>(
    typed: impl IntoIterator<Item = (&'c mut ToolCall, Secret)>,
) -> (Vec<Credential>, Vec<(String, String)>) {
    let typed: Vec<(&mut ToolCall, Secret)> = typed.into_iter().collect();
    let typed_last = |secret: &Secret| {
        let last = typed.iter().rev().find(|(_, later)| later.site == secret.site && later.field == secret.field);
        last.is_some_and(|(_, last)| last.value == secret.value)
    };
    let mut credentials: Vec<Credential> = Vec::new();
    for (_, secret) in typed.iter().filter(|(_, secret)| typed_last(secret)) {
        credential_for(&mut credentials, secret);
    }
    let mut scrubs: Vec<(String, String)> = Vec::new();
    for (call, secret) in typed {
        let placeholder = credential_for(&mut credentials, &secret);
        match &mut call.action {
            ToolAction::Input { text } => *text = placeholder.clone(),
            ToolAction::SelectDropdown { option } => *option = placeholder.clone(),
            _ => {}
        }
        for value in secret.earlier_values.iter().chain([&secret.value]) {
            if value.chars().count() >= secrets::MIN_SECRET_CHARS {
                for encoded in secrets::encoded_forms(value, &placeholder) {
                    scrubs.push((encoded.form, encoded.stand_in));
                }
            }
        }
    }
    scrubs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    scrubs.dedup();
    (credentials, scrubs)
}

/// The placeholder of `secret`'s credential: the one with its value in its field (numbered or not), or a
/// new one, under the field's name or, when that is taken, the first number free after it.
fn credential_for(credentials: &mut Vec<Credential>, secret: &Secret) -> String {
    let existing = credentials.iter().find(|c| {
        c.site == secret.site
            && (c.field == secret.field || c.field.starts_with(&format!("{}_", secret.field)))
            && c.value == secret.value
    });
    if let Some(credential) = existing {
        return credential.placeholder();
    }
    let taken = |field: &str| credentials.iter().any(|c| c.site == secret.site && c.field == field);
    let mut field = secret.field.clone();
    let mut n = 2;
    while taken(&field) {
        field = format!("{}_{n}", secret.field);
        n += 1;
    }
    let credential =
        Credential { site: secret.site.clone(), field, target: secret.target.clone(), value: secret.value.clone() };
    let placeholder = credential.placeholder();
    credentials.push(credential);
    placeholder
}

/// A secret as it may appear: raw, form-encoded (a GET form's query) and percent-encoded.
/// Replaces every secret in every string of the call.
pub(super) fn scrub(call: &mut ToolCall, scrubs: &[(String, String)]) {
    fn walk(value: &mut serde_json::Value, scrubs: &[(String, String)]) -> bool {
        match value {
            serde_json::Value::String(text) => {
                let mut changed = false;
                for (secret, placeholder) in scrubs {
                    if text.contains(secret.as_str()) {
                        *text = text.replace(secret.as_str(), placeholder);
                        changed = true;
                    }
                }
                changed
            }
            serde_json::Value::Array(items) => {
                items.iter_mut().fold(false, |changed, item| walk(item, scrubs) | changed)
            }
            serde_json::Value::Object(map) => {
                map.values_mut().fold(false, |changed, item| walk(item, scrubs) | changed)
            }
            _ => false,
        }
    }
    let Ok(mut value) = serde_json::to_value(&*call) else { return };
    if walk(&mut value, scrubs)
        && let Ok(scrubbed) = serde_json::from_value(value)
    {
        *call = scrubbed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::test_recording::*;

    /// Issue #44: a site behind HTTP Basic authentication; the person typed into the browser's dialog.
    #[test]
    fn the_credentials_of_http_basic_authentication_are_the_sites() {
        use base64::Engine as _;
        let request = |path: &str, authorization: &str| {
            let mut request = Request {
                request_id: path.to_owned(),
                url: format!("{SITE}{path}"),
                method: "GET".to_owned(),
                headers: Vec::new(),
                post_data: None,
                resource_type: Some("Document".to_owned()),
            };
            if !authorization.is_empty() {
                request.headers.push(trace_manifest::event::Header::new("Authorization", authorization));
            }
            EventKind::Request(request)
        };
        let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("admin:s3cret-wick"));
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        rec.add(Some(TAB), request("/", ""));
        rec.add(Some(TAB), request("/login", &basic));
        rec.add(Some(TAB), request("/newticket", &basic));
        let derived = rec.derive();
        let basic: Vec<(&str, &str, &str)> =
            derived.credentials.iter().map(|c| (c.site.as_str(), c.field.as_str(), c.value.as_str())).collect();
        assert_eq!(basic, [("shop.test", HTTP_BASIC_FIELD, "admin:s3cret-wick")]);
        assert!(!serde_json::to_string(&derived.trajectory).unwrap().contains("s3cret"));

        // A bearer token a page's script sends is the page's business, and a redacted header no credential.
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        rec.add(Some(TAB), request("/api", "Bearer tok-0123456789"));
        rec.add(Some(TAB), request("/login", "Basic trace-redacted-header-authorization-1"));
        assert!(rec.derive().credentials.is_empty());
    }

    #[test]
    fn a_secret_is_a_placeholder_in_the_trajectory_and_a_credential_beside_it() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/login", NavigationCause::Typed);
        let mut password = typing("#pw", "hunter22");
        password.credential = true;
        password.target.as_mut().unwrap().name = Some("user[password]".to_owned());
        rec.action(TAB, password.clone());
        rec.action(TAB, key("Enter", &[]));
        // A GET form puts the secret in the URL: it is scrubbed there too.
        rec.navigation(TAB, "/login?user%5Bpassword%5D=hunter22", NavigationCause::FormSubmit);
        // The person mistyped it: the login failed and they typed another secret into the same field. It is
        // the one that worked, the field's credential; the first is a second one, numbered after it.
        rec.action(TAB, Action { value: Some("hunter23".to_owned()), ..password });
        let derived = rec.derive();

        let first = "{{credentials.shop.test.user_password__2}}";
        let second = "{{credentials.shop.test.user_password_}}";
        assert_eq!(call(&derived, 1).action, ToolAction::Input { text: first.to_owned() });
        assert_eq!(
            call(&derived, 2).url_after.as_deref(),
            Some(&*format!("https://shop.test/login?user%5Bpassword%5D={first}"))
        );
        assert_eq!(call(&derived, 3).action, ToolAction::Input { text: second.to_owned() });
        let json = serde_json::to_string(&derived.trajectory).unwrap();
        assert!(!json.contains("hunter2"), "{json}");

        let extracted: Vec<(&str, &str, &str)> =
            derived.credentials.iter().map(|c| (c.site.as_str(), c.field.as_str(), c.value.as_str())).collect();
        assert_eq!(
            extracted,
            [("shop.test", "user_password_", "hunter23"), ("shop.test", "user_password__2", "hunter22")]
        );
        assert_eq!(derived.credentials[0].placeholder(), second);
        assert!(!format!("{derived:?}").contains("hunter2"));
    }
}
