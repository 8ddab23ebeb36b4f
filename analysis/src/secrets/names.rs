//! Which names say that a value is a secret, and which words cannot be one: the one list of secret names
//! (for cookies, headers, URL parameters, form, JSON and storage fields, and the fields a person types
//! into), the names of headers that carry the browser's state, and the words a rule chose by name that are
//! kept rather than replaced. Rule tables are data here; the search (`finding`) applies them.

/// Words no secret may be: parts of every URL and page, of content types, and field names of the HAR and
/// the bundle's other files, so that replacing them would wreck the bundle (`text/plain` turned into
/// `trace-redacted-…/plain`, a HAR whose entries lose their `name`), and leaving them would not be
/// redaction. Compared without regard to case.
pub const COMMON_WORDS: &[&str] = &[
    // The web's.
    "http",
    "https",
    "www",
    "html",
    "json",
    "xml",
    "text",
    "plain",
    "application",
    "javascript",
    "image",
    "font",
    "audio",
    "video",
    "multipart",
    "form-data",
    "charset",
    "utf-8",
    "index",
    "true",
    "false",
    "null",
    // The HAR's and the bundle's field names.
    "name",
    "value",
    "version",
    "creator",
    "entries",
    "pages",
    "pageref",
    "request",
    "response",
    "method",
    "url",
    "headers",
    "cookies",
    "content",
    "status",
    "statustext",
    "size",
    "time",
    "timings",
    "mimetype",
    "params",
    "postdata",
    "querystring",
    "redirecturl",
    "httpversion",
    "headerssize",
    "bodysize",
    "starteddatetime",
    "encoding",
    "comment",
    "path",
    "domain",
    "expires",
    "httponly",
    "secure",
    "cache",
    "send",
    "wait",
    "receive",
    "title",
    "kind",
    "type",
    "event",
    "events",
    "task",
    "files",
    "sha256",
];

/// Words that make a name secret wherever they appear inside one of its words (`user_password`,
/// `csrfmiddlewaretoken`, `PHPSESSID`).
pub const SECRET_NAME_CONTAINED: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "token",
    "secret",
    "csrf",
    "xsrf",
    "session",
    "sessid",
    "apikey",
    "jwt",
    "bearer",
    "credential",
    // Per-session values a page hands to its forms: a replay or a stranger must not get them.
    "nonce",
    "captcha",
];
/// Words that make a name secret only as a whole word (`pin` but not `spinner`, `auth` but not `author`).
pub const SECRET_NAME_WHOLE: &[&str] = &[
    "pass",
    "pwd",
    "passcode",
    "pin",
    "sid",
    "otp",
    "sig",
    "signature",
    "auth",
    "authorization",
    "cvv",
    "cvc",
    "csc",
    "card",
    "ssn",
    // `key`, `form_key`, `license_key`: a word of its own (not `keyword`, `monkey`).
    "key",
];
/// Secret compounds, found in the name with `-` and `_` removed (`X-Api-Key`, `one_time_code`).
pub const SECRET_NAME_COMPOUNDS: &[&str] = &["apikey", "accesskey", "privatekey", "clientsecret", "onetime"];

/// Words that make a request header one that carries the browser's credentials wherever they appear in
/// its lower-case name (`x-csrf-token`, `x-auth-user`), besides `Authorization`: broader than
/// [`is_secret_name`], since a header that merely mentions them is state replay must tell twins apart by.
pub const STATE_HEADER_NAME_CONTAINED: &[&str] = &["token", "session", "csrf", "xsrf", "auth"];

/// Request headers that carry the browser's credentials rather than describe the request
/// ([`crate::request_state`] reads them).
pub fn is_state_header(lower_case_name: &str) -> bool {
    lower_case_name == "authorization" || STATE_HEADER_NAME_CONTAINED.iter().any(|word| lower_case_name.contains(word))
}

/// Does a cookie, header, parameter, field or key name say that its value is a secret? The name is split
/// into words (at punctuation and lower-to-upper case changes), each word compared with
/// [`SECRET_NAME_CONTAINED`] and [`SECRET_NAME_WHOLE`], and the name without `-` and `_` searched for
/// [`SECRET_NAME_COMPOUNDS`]. The in-page capture script applies the same rule with these lists, which it is
/// given when its text is built (`trace_capture::actions`), to the fields the person types into.
pub fn is_secret_name(name: &str) -> bool {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() || (c.is_uppercase() && previous_lower) {
            words.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    words.push(word);
    let joined = name.to_ascii_lowercase().replace(['-', '_'], "");
    SECRET_NAME_COMPOUNDS.iter().any(|compound| joined.contains(compound))
        || words.iter().any(|word| {
            SECRET_NAME_CONTAINED.iter().any(|part| word.contains(part)) || SECRET_NAME_WHOLE.contains(&word.as_str())
        })
}

/// A plain word: letters only, all lower case or capitalized, at most 16 of them (`dark`, `English`).
/// Tokens mix cases and digits.
pub fn is_plain_word(value: &str) -> bool {
    let mut chars = value.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    first_ok && value.len() <= 16 && chars.all(|c| c.is_ascii_lowercase())
}

/// A word of [`COMMON_WORDS`], in any case.
pub(super) fn is_common_word(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    COMMON_WORDS.contains(&lower.as_str())
}

/// Words, as a name rule that is broad may find them (`sort_key=price`, `key=createdAt`,
/// `auth_mode=Single Sign-On`): at most 24 characters of words of letters, each of two or more, lower case
/// or capitalized, with a vowel, joined by `_`, `-`, a space or a change of case (or one all-capital word
/// of up to 6, `POST`). Tokens mix in digits and runs of capitals, and their short runs lack vowels.
pub(super) fn is_word_like(value: &str) -> bool {
    if value.is_empty() || value.len() > 24 || !value.chars().all(|c| c.is_ascii_alphabetic() || "_- ".contains(c)) {
        return false;
    }
    if value.len() <= 6 && value.chars().all(|c| c.is_ascii_uppercase()) {
        return true;
    }
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in value.chars() {
        if !c.is_ascii_alphabetic() || (c.is_ascii_uppercase() && !word.is_empty()) {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphabetic() {
            word.push(c);
        }
    }
    words.push(word);
    words.iter().filter(|word| !word.is_empty()).all(|word| {
        word.len() >= 2
            && word.chars().skip(1).all(|c| c.is_ascii_lowercase())
            && word.chars().any(|c| "aeiouyAEIOUY".contains(c))
    })
}

/// A number of fewer than 8 digits (`pin_length=6`, `sort_key=2`): it turns up by chance in every
/// timestamp and size of a bundle.
pub(super) fn is_small_number(value: &str) -> bool {
    !value.is_empty() && value.len() < 8 && value.chars().all(|c| c.is_ascii_digit())
}

/// Values that are never secrets whatever their name: booleans, empties and the like.
pub(super) fn is_inert(value: &str) -> bool {
    matches!(value.to_ascii_lowercase().as_str(), "true" | "false" | "null" | "undefined" | "none" | "yes" | "no")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_told_by_their_words() {
        for name in [
            "password",
            "user_password",
            "csrf",
            "csrfmiddlewaretoken",
            "authenticity_token",
            "X-CSRF-Token",
            "sessionid",
            "PHPSESSID",
            "access_token",
            "accessToken",
            "api_key",
            "X-Api-Key",
            "client_secret",
            "sid",
            "pin",
            "Authorization",
            "one_time_code",
            "passphrase",
            "card_csc",
            "key",
            "form_key",
            "licenseKey",
        ] {
            assert!(is_secret_name(name), "{name} names a secret");
        }
        for name in ["q", "author", "passenger", "compass", "page", "sort", "lang", "product", "shipping", "keyword"] {
            assert!(!is_secret_name(name), "{name} names no secret");
        }
    }

    #[test]
    fn words_and_small_numbers_are_told_from_tokens() {
        for word in ["price", "name", "createdAt", "Single Sign-On", "sort_by_date", "POST", "desc", "12", "1234567"] {
            assert!(is_word_like(word) || is_small_number(word), "{word} is a word");
        }
        for token in [
            "k3y-0123456789",
            "AbCdEfGh",
            "aBcDeFgHiJ",
            "xkcdqwrtz",
            "12345678",
            "correcthorsebatterystapleextra",
            "tok_9f2c",
        ] {
            assert!(!is_word_like(token) && !is_small_number(token), "{token} is no word");
        }
    }
}
