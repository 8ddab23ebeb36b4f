//! The forms a secret takes in a bundle: every encoding a page, a server or a browser writes it in
//! ([`encoded_forms`], each with the same form of its stand-in, for replacing), and a pattern that finds
//! it however each of its characters is written ([`encoded_pattern`], for the exporter's final search).

/// One form a secret takes in a bundle, and the same form of what stands in for it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EncodedForm {
    pub form: String,
    pub stand_in: String,
}

/// Base64 and hex forms shorter than this are not looked for: they would turn up by chance in the bundle's
/// other encoded data.
const MIN_BINARY_FORM_CHARS: usize = 8;

/// The forms `value` may take in a bundle, each with the same form of `stand_in`, longest first:
/// - as typed, JSON-escaped (as in `events.jsonl` and the HAR, with `<`, `>` and `&` as `\u` escapes, as
///   some servers write them, and with `\/` and non-ASCII as `\u` escapes, as PHP and Python do) and
///   HTML-escaped (as in pages and DOM snapshots: a text node's `&`, `<` and `>`, and quotes by name or
///   number);
/// - percent-encoded as forms write it (`+` for a space), as `encodeURIComponent` writes it (`!'()*~`
///   bare), and strictly (only RFC 3986's unreserved characters bare), each with upper- and lower-case hex;
///   and JSON-escaped around those;
/// - inside base64 and base64url, at each of the three alignments a secret can have inside a longer
///   encoded text (a `user:password` pair, a JSON document): the characters that depend on the secret
///   alone, and those with their `+` and `/` percent-encoded or `/` JSON-escaped. Their stand-in has the
///   same length once decoded, and the same escapes, so that the text around still decodes;
/// - as hex, lower and upper case.
///
/// `stand_in` is a placeholder of letters, digits, `-`, `.`, `{` and `}`, which the textual encodings leave
/// as it is.
pub fn encoded_forms(value: &str, stand_in: &str) -> Vec<EncodedForm> {
    let text = |form: String| EncodedForm { form, stand_in: stand_in.to_owned() };
    let mut forms: Vec<EncodedForm> = Vec::new();
    let mut textual = vec![value.to_owned()];
    for keep in [FORM_BARE, URI_COMPONENT_BARE, UNRESERVED_BARE] {
        for upper in [true, false] {
            let encoded = percent_encoded(value, keep, upper);
            if keep == FORM_BARE {
                textual.push(encoded.replace("%20", "+"));
            }
            textual.push(encoded);
        }
    }
    // A DOM text node escapes `&`, `<` and `>` only; attributes and escaping functions add quotes, by name
    // (`&quot;`) or number (PHP's `&#039;`, Python's `&#x27;`, `&#34;`).
    let text_node = value.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let html = text_node.replace('"', "&quot;");
    let numeric = text_node.replace('"', "&#34;").replace('\'', "&#39;");
    textual.extend([
        html.replace('\'', "&#39;"),
        html.replace('\'', "&#039;"),
        html.replace('\'', "&#x27;"),
        html,
        numeric,
        text_node,
    ]);
    let escaped: Vec<String> = textual
        .iter()
        .flat_map(|form| {
            let json = json_escaped(form);
            let unicode = json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
            // PHP's `json_encode` and Python's `json.dumps` by default: `\/`, and `\u00e9` for `é`.
            let ascii = ascii_json_escaped(&json);
            [json, unicode, ascii]
        })
        .collect();
    textual.extend(escaped);
    forms.extend(textual.into_iter().map(text));

    let (secret, filler) = (value.as_bytes(), stand_in.as_bytes().repeat(value.len() / stand_in.len().max(1) + 2));
    for engine in [&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::URL_SAFE] {
        for alignment in 0..3 {
            let form = base64_core(engine, secret, alignment);
            if form.len() >= MIN_BINARY_FORM_CHARS {
                let mut stand_in = base64_core(engine, &filler, alignment);
                stand_in.truncate(form.len());
                // Base64 put in a URL by `encodeURIComponent(btoa(…))` or a form, or in JSON by PHP: its
                // `+` and `/` escaped, and its stand-in's the same way.
                if form.contains(['+', '/']) {
                    for escape in [base64_percent_upper, base64_percent_lower, base64_json] {
                        forms.push(EncodedForm { form: escape(&form), stand_in: escape(&stand_in) });
                    }
                }
                forms.push(EncodedForm { form, stand_in });
            }
        }
    }
    if secret.len() * 2 >= MIN_BINARY_FORM_CHARS {
        forms.push(EncodedForm { form: hex::encode(secret), stand_in: hex::encode(stand_in) });
        forms.push(EncodedForm { form: hex::encode_upper(secret), stand_in: hex::encode_upper(stand_in) });
    }
    forms.sort_by(|a, b| b.form.len().cmp(&a.form.len()).then_with(|| a.cmp(b)));
    forms.dedup_by(|a, b| a.form == b.form);
    forms
}

/// What `application/x-www-form-urlencoded` leaves bare (besides letters and digits; a space is `+`).
const FORM_BARE: &str = "*-._";
/// What `encodeURIComponent` leaves bare.
const URI_COMPONENT_BARE: &str = "!'()*-._~";
/// RFC 3986's unreserved characters.
const UNRESERVED_BARE: &str = "-._~";

fn percent_encoded(value: &str, bare: &str, upper: bool) -> String {
    value
        .bytes()
        .map(|b| match b {
            b if b.is_ascii_alphanumeric() || bare.as_bytes().contains(&b) => (b as char).to_string(),
            b if upper => format!("%{b:02X}"),
            b => format!("%{b:02x}"),
        })
        .collect()
}

/// The base64 characters that encode `bytes` alone when they start `alignment` bytes into a 3-byte group:
/// the characters shared with the bytes before and after are left out.
fn base64_core(engine: &base64::engine::GeneralPurpose, bytes: &[u8], alignment: usize) -> String {
    use base64::Engine as _;
    let mut padded = vec![0u8; alignment];
    padded.extend_from_slice(bytes);
    let encoded = engine.encode(&padded);
    // Characters of 6 bits: the first that holds no bit of the padding, and the last whose bits are all
    // the secret's.
    let start = (alignment * 8).div_ceil(6);
    let end = (padded.len() * 8) / 6;
    encoded.get(start..end).map_or_else(String::new, str::to_owned)
}

fn base64_percent_upper(text: &str) -> String {
    text.replace('+', "%2B").replace('/', "%2F")
}

fn base64_percent_lower(text: &str) -> String {
    text.replace('+', "%2b").replace('/', "%2f")
}

fn base64_json(text: &str) -> String {
    text.replace('/', "\\/")
}

/// JSON already escaped, with `/` escaped too and every character past ASCII as `\u` escapes (in lower
/// case, as PHP and Python write them; a surrogate pair past the BMP).
fn ascii_json_escaped(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '/' => out.push_str("\\/"),
            c if c.is_ascii() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out
}

/// A pattern that finds one value in a bundle however each of its characters is written: the source of a
/// regular expression, and the most bytes one match of it can take (what a search of a stream must keep
/// from one chunk to the next).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPattern {
    pub source: String,
    pub max_len: usize,
}

/// `value` with each character written any way a page, a server or a browser may write it, each
/// independently of the others, so that what no single encoder of [`encoded_forms`] makes is found too: a
/// DOM text node (`&` escaped, `"` bare), `encodeURI` (`@ / + : ; , ? & = $ #` bare), HTML numeric and named
/// references, `\/` and `\u00e9` in JSON, and any mix of them. Each character may be:
/// - as it is; a `"`, `'`, `/` or `\` after backslashes, as JSON or JavaScript escape it, in JSON inside
///   JSON too;
/// - for a space, `+`;
/// - percent-encoded byte by byte, hex in either case, and again (`%2540`);
/// - an HTML reference: decimal or hex, with leading zeros, or named (`&commat;`, `&eacute;`), its `&`
///   itself escaped or not (`&amp;#64;`, `\u0026#64;`);
/// - a JSON or JavaScript escape: `\u0040` (two past the BMP), `\x40`.
///
/// Base64 and hex, which encode bytes together, are [`encoded_forms`]'s. Built once per secret: matching
/// is linear in the text, whatever the secret.
pub fn encoded_pattern(value: &str) -> EncodedPattern {
    let mut source = String::new();
    let mut max_len = 0;
    for c in value.chars() {
        let alternatives = char_alternatives(c);
        max_len += alternatives.iter().map(|(_, len)| *len).max().unwrap_or(0);
        let patterns: Vec<&str> = alternatives.iter().map(|(pattern, _)| pattern.as_str()).collect();
        source.push_str(&format!("(?:{})", patterns.join("|")));
    }
    EncodedPattern { source, max_len }
}

/// The ways one character may be written (see [`encoded_pattern`]), each a pattern with the most bytes it
/// matches.
fn char_alternatives(c: char) -> Vec<(String, usize)> {
    // The `&` that starts a reference, as it is, HTML-escaped or JSON-escaped.
    const AMPERSAND: &str = r"(?:&|&amp;|\\{1,4}u0026)";
    const AMPERSAND_LEN: usize = 9;
    let code = u32::from(c);
    let mut alternatives = vec![match c {
        '"' => (r#"\\{0,7}""#.to_owned(), 8),
        '\'' | '/' => (format!(r"\\{{0,3}}{c}"), 4),
        '\\' => (r"\\{1,8}".to_owned(), 8),
        c => (regex::escape(c.encode_utf8(&mut [0; 4])), c.len_utf8()),
    }];
    if c == ' ' {
        alternatives.push((r"\+".to_owned(), 1));
    }
    let mut utf8 = [0u8; 4];
    let bytes = c.encode_utf8(&mut utf8).as_bytes();
    let percent: String = bytes.iter().map(|byte| format!("%(?:25)?{}", hex_pattern(u32::from(*byte), 2))).collect();
    alternatives.push((percent, 5 * bytes.len()));
    let decimal = code.to_string();
    alternatives.push((format!("{AMPERSAND}#0{{0,6}}{decimal};"), AMPERSAND_LEN + 8 + decimal.len()));
    let hex = format!("{code:x}");
    alternatives.push((format!("{AMPERSAND}#[xX]0{{0,6}}{};", hex_pattern(code, 1)), AMPERSAND_LEN + 9 + hex.len()));
    for name in entity_names(c) {
        alternatives.push((format!("{AMPERSAND}{name};"), AMPERSAND_LEN + name.len() + 1));
    }
    let mut units = [0u16; 2];
    let units = c.encode_utf16(&mut units);
    let unicode: String = units.iter().map(|unit| format!(r"\\{{1,4}}u{}", hex_pattern(u32::from(*unit), 4))).collect();
    alternatives.push((unicode, 9 * units.len()));
    if code < 0x100 {
        alternatives.push((format!(r"\\{{1,4}}x{}", hex_pattern(code, 2)), 7));
    }
    alternatives
}

/// `n` in hex of at least `width` digits, each letter in either case.
fn hex_pattern(n: u32, width: usize) -> String {
    format!("{n:0width$x}")
        .chars()
        .map(|digit| match digit {
            'a'..='f' => format!("[{digit}{}]", digit.to_ascii_uppercase()),
            digit => digit.to_string(),
        })
        .collect()
}

/// HTML's names for a character: ASCII punctuation's (HTML5) and Latin-1's (HTML 4, which PHP's
/// `htmlentities` writes).
fn entity_names(c: char) -> &'static [&'static str] {
    match c {
        '\t' => &["Tab"],
        '\n' => &["NewLine"],
        '!' => &["excl"],
        '"' => &["quot", "QUOT"],
        '#' => &["num"],
        '$' => &["dollar"],
        '%' => &["percnt"],
        '&' => &["amp", "AMP"],
        '\'' => &["apos"],
        '(' => &["lpar"],
        ')' => &["rpar"],
        '*' => &["ast", "midast"],
        '+' => &["plus"],
        ',' => &["comma"],
        '.' => &["period"],
        '/' => &["sol"],
        ':' => &["colon"],
        ';' => &["semi"],
        '<' => &["lt", "LT"],
        '=' => &["equals"],
        '>' => &["gt", "GT"],
        '?' => &["quest"],
        '@' => &["commat"],
        '[' => &["lsqb", "lbrack"],
        '\\' => &["bsol"],
        ']' => &["rsqb", "rbrack"],
        '^' => &["Hat"],
        '_' => &["lowbar", "UnderBar"],
        '`' => &["grave", "DiacriticalGrave"],
        '{' => &["lcub", "lbrace"],
        '|' => &["verbar", "vert", "VerticalLine"],
        '}' => &["rcub", "rbrace"],
        '\u{a0}'..='\u{ff}' => std::slice::from_ref(&LATIN_1_ENTITIES[c as usize - 0xa0]),
        _ => &[],
    }
}

/// HTML 4's names of U+00A0 to U+00FF, in order.
const LATIN_1_ENTITIES: [&str; 96] = [
    "nbsp", "iexcl", "cent", "pound", "curren", "yen", "brvbar", "sect", "uml", "copy", "ordf", "laquo", "not", "shy",
    "reg", "macr", "deg", "plusmn", "sup2", "sup3", "acute", "micro", "para", "middot", "cedil", "sup1", "ordm",
    "raquo", "frac14", "frac12", "frac34", "iquest", "Agrave", "Aacute", "Acirc", "Atilde", "Auml", "Aring", "AElig",
    "Ccedil", "Egrave", "Eacute", "Ecirc", "Euml", "Igrave", "Iacute", "Icirc", "Iuml", "ETH", "Ntilde", "Ograve",
    "Oacute", "Ocirc", "Otilde", "Ouml", "times", "Oslash", "Ugrave", "Uacute", "Ucirc", "Uuml", "Yacute", "THORN",
    "szlig", "agrave", "aacute", "acirc", "atilde", "auml", "aring", "aelig", "ccedil", "egrave", "eacute", "ecirc",
    "euml", "igrave", "iacute", "icirc", "iuml", "eth", "ntilde", "ograve", "oacute", "ocirc", "otilde", "ouml",
    "divide", "oslash", "ugrave", "uacute", "ucirc", "uuml", "yacute", "thorn", "yuml",
];

fn json_escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).expect("a string always serializes");
    quoted[1..quoted.len() - 1].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    #[test]
    fn a_secret_is_found_in_every_encoding_a_page_may_use() {
        use base64::Engine as _;
        let secret = "hunter2@Blue!(x)";
        let forms = encoded_forms(secret, "trace-redacted-credential-password-1");
        let found_in = |text: &str| forms.iter().any(|encoded| text.contains(&encoded.form));
        let standard = base64::engine::general_purpose::STANDARD;
        let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut texts = vec![
            secret.to_owned(),
            "hunter2%40Blue!(x)".to_owned(), // encodeURIComponent
            "hunter2%40Blue%21%28x%29".to_owned(),
            "hunter2%40blue".to_owned(), // not the secret: a prefix in another case
            "\"hunter2@Blue!(x)\"".to_owned(),
            "hunter2@Blue!(x)".bytes().map(|b| format!("{b:02x}")).collect(),
        ];
        // Inside base64 at every alignment: a `user:password` pair, and a JSON document.
        for prefix in ["", "a", "an", "ann:", "{\"pass\":\""] {
            texts.push(standard.encode(format!("{prefix}{secret}\"}}")));
            texts.push(url_safe.encode(format!("{prefix}{secret}")));
        }
        for text in &texts {
            let expected = !text.ends_with("%40blue");
            assert_eq!(found_in(text), expected, "{text}");
        }
        // Stand-ins of base64 forms keep the length, so that the text around still decodes.
        for engine in [&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::URL_SAFE] {
            for alignment in 0..3 {
                let core = base64_core(engine, secret.as_bytes(), alignment);
                let encoded = forms.iter().find(|encoded| encoded.form == core).expect("every alignment's form");
                assert_eq!(encoded.stand_in.len(), core.len(), "{encoded:?}");
            }
        }
        // A secret too short for a base64 form to be told from chance has none.
        assert!(encoded_forms("abcd", "x").iter().all(|encoded| encoded.form.len() < 8 || encoded.form == "61626364"));
    }

    /// Issue #11: each character of a secret may be written its own way, as no one encoder of
    /// [`encoded_forms`] writes it: the pattern finds every mix, and nothing else.
    #[test]
    fn a_secret_is_found_however_each_of_its_characters_is_written() {
        let secret = "p&ss \"wörd\"/@+1'";
        let pattern = encoded_pattern(secret);
        let whole = Regex::new(&format!("^(?:{})$", pattern.source)).unwrap();
        for written in [
            secret,
            // A DOM text node: `&` escaped, the quotes bare.
            "p&amp;ss \"wörd\"/@+1'",
            // HTML numeric references, decimal and hex, padded, in either case; and named ones, as PHP's
            // `htmlentities` writes them.
            "p&#38;ss&#32;&#34;w&#246;rd&#x22;&#x2F;&#64;&#43;1&#039;",
            "p&#X26;ss &#x0022;w&#xF6;rd&quot;&sol;&commat;&plus;1&apos;",
            "p&amp;ss &quot;w&ouml;rd&quot;/@+1&#039;",
            // `encodeURI` (`& / @ + '` bare), `encodeURIComponent` in lower case, the form encoding, and
            // percent-encoding twice.
            "p&ss%20%22w%C3%B6rd%22/@+1'",
            "p%26ss%20%22w%c3%b6rd%22%2f%40%2b1'",
            "p%26ss+%22w%C3%B6rd%22%2F%40%2B1%27",
            "p%2526ss%2520%2522w%25C3%25B6rd%2522%252F%2540%252B1%2527",
            // JSON as PHP and Python write it, with `\u` escapes, and JSON inside JSON.
            r#"p&ss \"w\u00f6rd\"\/@+1'"#,
            r#"p\u0026ss \"w\u00F6rd\"\/\u0040\u002b1\u0027"#,
            r#"p&ss \\\"wörd\\\"/@+1'"#,
            // JavaScript's `\x` escapes; HTML references escaped again, by HTML and by JSON.
            r#"p\x26ss \x22w\xf6rd\x22/@+1\x27"#,
            "p&amp;#38;ss \\u0026#34;wörd&#34;/@+1'",
        ] {
            assert!(whole.is_match(written), "{written}");
            assert!(written.len() <= pattern.max_len, "{written}: longer than {}", pattern.max_len);
        }
        for other in ["p&ss \"word\"/@+1'", "p&ss \"wörd\"/@+2'", "P&ss \"wörd\"/@+1'", "p&#38ss \"wörd\"/@+1'"] {
            assert!(!whole.is_match(other), "{other}");
        }
        // The enumerated forms hold the commonest of these too.
        let forms = encoded_forms(secret, "x");
        for written in ["p&amp;ss \"wörd\"/@+1'", "p&amp;ss &#34;wörd&#34;/@+1&#39;", r#"p&ss \"w\u00f6rd\"\/@+1'"#] {
            assert!(forms.iter().any(|encoded| encoded.form == written), "{written}");
        }
    }

    /// Issue #11: base64 put in a URL by `encodeURIComponent(btoa(user + ":" + password))`, or in JSON by
    /// PHP, has its `+` and `/` escaped; the secret's part is found all the same, and its stand-in escaped
    /// the same way.
    #[test]
    fn base64_with_its_plus_and_slash_escaped_is_found() {
        use base64::Engine as _;
        let secret = "open? sesame@vault!(7)>";
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("ann:{secret}"));
        assert!(basic[8..basic.len() - 4].contains(['+', '/']), "{basic}");
        let forms = encoded_forms(secret, "trace-redacted-credential-passphrase-1");
        let escaped = [
            basic.replace('+', "%2B").replace('/', "%2F").replace('=', "%3D"),
            basic.replace('+', "%2b").replace('/', "%2f"),
            basic.replace('/', "\\/"),
        ];
        for text in &escaped {
            let found = forms.iter().find(|encoded| text.contains(&encoded.form));
            let found = found.unwrap_or_else(|| panic!("{text}"));
            assert!(!found.stand_in.contains(['+', '/']) || found.stand_in.contains("\\/"), "{found:?}");
        }
    }
}
