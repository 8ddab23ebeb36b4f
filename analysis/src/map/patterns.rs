//! Context patterns: the documented, deterministic rules that turn a page's URL into the abstract location
//! it is an instance of (`docs/maps.md` states them for users).
//!
//! 1. The site's origin becomes `{site}`; another origin stays as it is.
//! 2. A path segment that is a number, a UUID, a long hex string, a long base64-like id or a date becomes a
//!    typed placeholder: `{int}`, `{uuid}`, `{hex}`, `{id}`, `{date}`.
//! 3. A segment position whose values differ between pages of one template (the same DOM skeleton, the same
//!    number of segments) becomes a named placeholder, named after the segment before it (`/item/{item}`,
//!    `/users/{user}`).
//! 4. Query keys are kept and their values dropped (`?q={q}`), except for a key whose two to four values
//!    each show a different kind of page (a different skeleton): those values are kept, one context each.

use std::collections::{BTreeMap, BTreeSet};

/// The rules learned from the pages of a set of recordings.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    site: String,
    templates: BTreeSet<Template>,
    /// Per path pattern, the query keys whose values are kept.
    kept_keys: BTreeMap<String, BTreeSet<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Template {
    origin: String,
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Segment {
    Literal(String),
    Typed(&'static str),
    Named(String),
}

impl Segment {
    fn text(&self) -> String {
        match self {
            Segment::Literal(text) => text.clone(),
            Segment::Typed(kind) => format!("{{{kind}}}"),
            Segment::Named(name) => format!("{{{name}}}"),
        }
    }
}

/// A URL taken apart: origin, path segments (typed where rule 2 applies) and query pairs.
struct Parts {
    origin: String,
    segments: Vec<Segment>,
    query: Vec<(String, String)>,
}

fn parts(url: &str) -> Option<Parts> {
    let parsed = url::Url::parse(url).ok()?;
    // `data:`, `about:`, `blob:` and error pages are no location of a site.
    if !matches!(parsed.scheme(), "http" | "https") {
        return None;
    }
    let origin = parsed.origin().ascii_serialization();
    let segments = parsed
        .path_segments()
        .map(|segments| segments.filter(|segment| !segment.is_empty()).map(typed).collect())
        .unwrap_or_default();
    let query = parsed.query_pairs().map(|(key, value)| (key.into_owned(), value.into_owned())).collect();
    Some(Parts { origin, segments, query })
}

/// Rule 2: a segment's typed placeholder, or the segment itself.
fn typed(segment: &str) -> Segment {
    let is_hex = |text: &str| text.chars().all(|c| c.is_ascii_hexdigit());
    let has_digit = segment.chars().any(|c| c.is_ascii_digit());
    let kind = if segment.chars().all(|c| c.is_ascii_digit()) {
        Some("int")
    } else if is_uuid(segment) {
        Some("uuid")
    } else if is_date(segment) {
        Some("date")
    } else if segment.len() >= 16 && is_hex(segment) && has_digit {
        Some("hex")
    } else if segment.len() >= 16
        && has_digit
        && segment.chars().any(|c| c.is_ascii_alphabetic())
        && segment.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '=' | '.'))
    {
        Some("id")
    } else {
        None
    };
    kind.map_or_else(|| Segment::Literal(segment.to_owned()), Segment::Typed)
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len && group.chars().all(|c| c.is_ascii_hexdigit()))
}

/// `2026-11-25`.
fn is_date(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 3
        && groups
            .iter()
            .zip([4, 2, 2])
            .all(|(group, len)| group.len() == len && group.chars().all(|c| c.is_ascii_digit()))
}

impl Rules {
    /// Learns rules 3 and 4 from the pages seen: each a URL with its DOM skeleton. `site` is the origin
    /// `{site}` stands for.
    pub fn learn<'a>(site: &str, pages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Rules {
        let mut rules = Rules { site: site.to_owned(), ..Rules::default() };
        let pages: Vec<(Parts, &str)> =
            pages.into_iter().filter_map(|(url, skeleton)| Some((parts(url)?, skeleton))).collect();

        // Rule 3: positions that vary within one template.
        let mut by_template: BTreeMap<(&str, usize, &str), BTreeSet<&[Segment]>> = BTreeMap::new();
        for (parts, skeleton) in &pages {
            by_template.entry((&parts.origin, parts.segments.len(), skeleton)).or_default().insert(&parts.segments);
        }
        for ((origin, len, _), paths) in by_template {
            if paths.len() < 2 {
                continue;
            }
            let paths: Vec<&[Segment]> = paths.into_iter().collect();
            let mut segments = paths[0].to_vec();
            let mut named = BTreeSet::new();
            for position in 0..len {
                if paths.iter().any(|path| path[position] != paths[0][position]) {
                    let mut name = placeholder_name(&segments, position);
                    while !named.insert(name.clone()) {
                        name.push('_');
                    }
                    segments[position] = Segment::Named(name);
                }
            }
            rules.templates.insert(Template { origin: origin.to_owned(), segments });
        }

        // Rule 4: keys whose few values show different kinds of page.
        let mut by_key: BTreeMap<(String, String), BTreeMap<String, BTreeSet<&str>>> = BTreeMap::new();
        for (parts, skeleton) in &pages {
            let path = rules.path_pattern(parts);
            for (key, value) in &parts.query {
                by_key
                    .entry((path.clone(), key.clone()))
                    .or_default()
                    .entry(value.clone())
                    .or_default()
                    .insert(skeleton);
            }
        }
        for ((path, key), values) in by_key {
            let skeleton_sets: Vec<&BTreeSet<&str>> = values.values().collect();
            let distinct = skeleton_sets
                .iter()
                .enumerate()
                .all(|(i, a)| skeleton_sets.iter().skip(i + 1).all(|b| a.is_disjoint(b)));
            if (2..=4).contains(&values.len()) && distinct {
                rules.kept_keys.entry(path).or_default().insert(key);
            }
        }
        rules
    }

    /// The context pattern of `url`; `None` for a URL that does not parse.
    pub fn pattern(&self, url: &str) -> Option<String> {
        let parts = parts(url)?;
        let path = self.path_pattern(&parts);
        let kept = self.kept_keys.get(&path);
        let mut keys: Vec<String> = parts
            .query
            .iter()
            .map(|(key, value)| match kept.is_some_and(|kept| kept.contains(key)) {
                true => format!("{key}={value}"),
                false => format!("{key}={{{key}}}"),
            })
            .collect();
        keys.sort();
        keys.dedup();
        Some(if keys.is_empty() { path } else { format!("{path}?{}", keys.join("&")) })
    }

    fn path_pattern(&self, parts: &Parts) -> String {
        let segments = self
            .templates
            .iter()
            .find(|template| template.origin == parts.origin && fits(&template.segments, &parts.segments))
            .map_or(&parts.segments, |template| &template.segments);
        let origin =
            if parts.origin == self.site { trace_manifest::map::SITE_PLACEHOLDER } else { parts.origin.as_str() };
        let path: Vec<String> = segments.iter().map(Segment::text).collect();
        format!("{origin}/{}", path.join("/"))
    }
}

/// Whether a template's segments describe these: literals and typed placeholders equal, named ones any.
fn fits(template: &[Segment], segments: &[Segment]) -> bool {
    template.len() == segments.len()
        && template.iter().zip(segments).all(|(wanted, found)| matches!(wanted, Segment::Named(_)) || wanted == found)
}

/// A named placeholder is called after the literal segment before it, singular (`items` → `item`), or by its
/// position.
fn placeholder_name(segments: &[Segment], position: usize) -> String {
    match position.checked_sub(1).map(|before| &segments[before]) {
        Some(Segment::Literal(word))
            if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
        {
            let word = word.to_ascii_lowercase();
            match word.strip_suffix('s') {
                Some(singular) if singular.len() >= 3 && !singular.ends_with('s') => singular.to_owned(),
                _ => word,
            }
        }
        _ => format!("segment{}", position + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_segments_are_told_by_their_shape() {
        let rules = Rules::learn("http://shop.test", []);
        let pattern = |url: &str| rules.pattern(url).unwrap();
        assert_eq!(pattern("http://shop.test/users/123/edit"), "{site}/users/{int}/edit");
        assert_eq!(pattern("http://shop.test/o/550e8400-e29b-41d4-a716-446655440000"), "{site}/o/{uuid}");
        assert_eq!(pattern("http://shop.test/c/0123456789abcdef0123"), "{site}/c/{hex}");
        assert_eq!(pattern("http://shop.test/s/dGhpcyBpcy0xMjM0NTY3"), "{site}/s/{id}");
        assert_eq!(pattern("http://shop.test/day/2026-11-25"), "{site}/day/{date}");
        // Words stay words, however long.
        assert_eq!(pattern("http://shop.test/blog/a-long-article-title"), "{site}/blog/a-long-article-title");
        assert_eq!(pattern("http://other.test:8080/x?b=2&a=1"), "http://other.test:8080/x?a={a}&b={b}");
        assert_eq!(pattern("http://shop.test/"), "{site}/");
        assert_eq!(rules.pattern("data:text/html,<p>hi"), None);
        assert_eq!(rules.pattern("about:blank"), None);
    }

    #[test]
    fn a_position_that_varies_within_one_template_is_named() {
        let pages = [
            ("http://shop.test/item/blue-mug", "item"),
            ("http://shop.test/item/teapot", "item"),
            ("http://shop.test/help", "help"),
            ("http://shop.test/deals", "deals"),
        ];
        let rules = Rules::learn("http://shop.test", pages);
        assert_eq!(rules.pattern("http://shop.test/item/red-mug").unwrap(), "{site}/item/{item}");
        // Pages of different templates keep their words.
        assert_eq!(rules.pattern("http://shop.test/help").unwrap(), "{site}/help");
        assert_eq!(rules.pattern("http://shop.test/deals").unwrap(), "{site}/deals");
        // One page alone teaches nothing.
        let alone = Rules::learn("http://shop.test", [("http://shop.test/item/blue-mug", "item")]);
        assert_eq!(alone.pattern("http://shop.test/item/teapot").unwrap(), "{site}/item/teapot");
    }

    #[test]
    fn query_values_are_kept_only_where_they_choose_the_kind_of_page() {
        let pages = [
            ("http://shop.test/search?q=mug", "results"),
            ("http://shop.test/search?q=tea", "results"),
            ("http://shop.test/search?q=zzz", "empty"),
            ("http://shop.test/admin?view=list", "list"),
            ("http://shop.test/admin?view=grid", "grid"),
        ];
        let rules = Rules::learn("http://shop.test", pages);
        assert_eq!(rules.pattern("http://shop.test/search?q=anything").unwrap(), "{site}/search?q={q}");
        assert_eq!(rules.pattern("http://shop.test/admin?view=grid").unwrap(), "{site}/admin?view=grid");
        assert_eq!(rules.pattern("http://shop.test/admin?view=list").unwrap(), "{site}/admin?view=list");
    }
}
