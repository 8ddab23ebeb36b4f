//! Snapshot packs: an exported bundle's snapshots (every file under `dom/`, the DOM and accessibility
//! snapshots, and under `screenshots/`) kept as one file, `dom.pack`, without repetition. Successive
//! snapshots of a page are mostly the same page; zipped one by one, each pays for all of it again. A
//! screenshot of a page that did not change between two captures (a click that only moved the focus, a
//! page shown again) is the same image, byte for byte: about a fifth to a third of the screenshots' bytes
//! of the recordings we measured. Packed, the files are concatenated in path order (capture order, the
//! text first) and compressed as one zstd stream whose window spans the whole pack and which looks for
//! long matches, so that a snapshot costs about what changed since the ones before it, and a screenshot
//! seen before costs a few bytes. (An image's own bytes do not compress further; zstd stores them as they
//! are.)
//!
//! Layout: [`MAGIC`], the index's length (8 bytes, little-endian), the index (JSON: each file's path, its
//! offset in the unpacked stream and its size), then the zstd stream of the files' contents, one after the
//! other. The files keep their names: `manifest.json` indexes each (size and sha256) as it indexes any
//! file, and lists `dom.pack` too; [`crate::archive::Bundle`] reads packed files as if they were entries
//! of their own, each within a file's limit, and never unpacks more than the index declares: the stream is
//! decoded as its files are read, and nothing of it is kept but the decoder's window.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

/// The file a bundle's snapshots are packed in.
pub const PACK_FILE: &str = "dom.pack";

/// What a pack starts with.
pub const MAGIC: &[u8] = b"TRACE-PACK 1\n";

/// An index longer than this is refused: it names files, it does not hold them.
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// The zstd level: about 20 MB/s on these machines, and most of the gain of the slowest levels, since
/// the long-distance matching does the work that matters here.
const LEVEL: i32 = 9;

/// The compression window, 2^27 = 128 MiB (the largest every zstd decoder accepts by default): a
/// snapshot is matched against everything packed before it within that distance.
const WINDOW_LOG: u32 = 27;

/// Whether a bundle file belongs in the pack: snapshots of the DOM and of the screen.
pub fn is_packed(path: &str) -> bool {
    [trace_manifest::bundle::DOM_DIR, trace_manifest::bundle::SCREENSHOTS_DIR]
        .iter()
        .any(|dir| path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/')))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct IndexEntry {
    path: String,
    offset: u64,
    size: u64,
}

/// A pack's index: where each packed file lies in the unpacked stream.
#[derive(Debug, Clone, Default)]
pub struct PackIndex {
    files: BTreeMap<String, (u64, u64)>,
    total: u64,
}

impl PackIndex {
    /// Each packed file with its size.
    pub fn files(&self) -> impl Iterator<Item = (&str, u64)> {
        self.files.iter().map(|(path, (_, size))| (path.as_str(), *size))
    }

    pub fn contains(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    /// The bytes of `path` in the unpacked stream.
    pub fn range(&self, path: &str) -> Option<std::ops::Range<usize>> {
        let &(offset, size) = self.files.get(path)?;
        Some(offset as usize..(offset + size) as usize)
    }

    /// The unpacked stream's length: the sum of the files' sizes.
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// Writes a pack of `files` ((path, size) in the order to pack them) to `out`; `copy` writes one file's
/// contents and returns how many bytes it wrote, which must be its size.
pub fn write_pack(
    out: &mut dyn Write,
    files: &[(String, u64)],
    mut copy: impl FnMut(&str, &mut dyn Write) -> io::Result<u64>,
) -> io::Result<()> {
    let mut offset = 0;
    let index: Vec<IndexEntry> = files
        .iter()
        .map(|(path, size)| {
            let entry = IndexEntry { path: path.clone(), offset, size: *size };
            offset += size;
            entry
        })
        .collect();
    let index = serde_json::to_vec(&index)?;
    out.write_all(MAGIC)?;
    out.write_all(&(index.len() as u64).to_le_bytes())?;
    out.write_all(&index)?;
    let mut encoder = zstd::stream::write::Encoder::new(out, LEVEL)?;
    encoder.long_distance_matching(true)?;
    encoder.window_log(WINDOW_LOG)?;
    encoder.include_contentsize(true)?;
    encoder.set_pledged_src_size(Some(offset))?;
    for (path, size) in files {
        let written = copy(path, &mut encoder)?;
        if written != *size {
            return Err(io::Error::other(format!("{path} is {written} bytes, expected {size}")));
        }
    }
    encoder.finish()?;
    Ok(())
}

/// Reads a pack's header and index from its first bytes; returns the index and where the compressed
/// stream starts. `max_total` bounds the unpacked size the index may declare.
pub fn read_index(pack: &[u8], max_total: u64) -> Result<(PackIndex, usize), String> {
    let rest = pack.strip_prefix(MAGIC).ok_or("not a TRACE snapshot pack (its first bytes are wrong)")?;
    let length: [u8; 8] = rest.get(..8).and_then(|b| b.try_into().ok()).ok_or("the pack ends in its header")?;
    let length = u64::from_le_bytes(length);
    if length > MAX_INDEX_BYTES {
        return Err(format!("the pack's index is {length} bytes, more than the limit of {MAX_INDEX_BYTES}"));
    }
    let index_bytes = rest.get(8..8 + length as usize).ok_or("the pack ends in its index")?;
    let entries: Vec<IndexEntry> =
        serde_json::from_slice(index_bytes).map_err(|error| format!("the pack's index does not parse: {error}"))?;
    let mut index = PackIndex::default();
    for entry in entries {
        if !is_packed(&entry.path) || !trace_manifest::bundle::is_safe_relative_path(&entry.path) {
            return Err(format!("the pack names {:?}, which is not a snapshot's path", entry.path));
        }
        if entry.offset != index.total {
            return Err(format!(
                "the pack's index puts {} at {}, not where the file before ends",
                entry.path, entry.offset
            ));
        }
        index.total = index.total.checked_add(entry.size).ok_or("the pack's sizes overflow")?;
        if index.total > max_total {
            return Err(format!("the pack unpacks to more than the limit of {max_total} bytes"));
        }
        if index.files.insert(entry.path.clone(), (entry.offset, entry.size)).is_some() {
            return Err(format!("the pack holds {} twice", entry.path));
        }
    }
    Ok((index, MAGIC.len() + 8 + length as usize))
}

/// Decodes a pack's stream (`compressed`, read from where [`read_index`] said it starts) into `out`: exactly
/// the `total` bytes its index declares, or an error; never more is decoded, whatever the stream holds.
pub fn unpack(compressed: impl Read, total: u64, out: &mut dyn Write) -> Result<(), String> {
    let damaged = |error: io::Error| format!("the pack's stream is damaged: {error}");
    let mut decoder = decoder(compressed)?;
    let written = io::copy(&mut (&mut decoder).take(total), out).map_err(damaged)?;
    if written != total {
        return Err(format!("the pack unpacks to {written} bytes, its index says {total}"));
    }
    if decoder.read(&mut [0]).map_err(damaged)? != 0 {
        return Err(format!("the pack unpacks to more than the {total} bytes its index says"));
    }
    Ok(())
}

/// A decoder of a pack's stream that accepts the window the pack was written with.
pub(crate) fn decoder<R: Read>(
    compressed: R,
) -> Result<zstd::stream::read::Decoder<'static, io::BufReader<R>>, String> {
    let mut decoder =
        zstd::stream::read::Decoder::new(compressed).map_err(|e| format!("the pack cannot be read: {e}"))?;
    decoder.window_log_max(WINDOW_LOG).map_err(|e| format!("the pack cannot be read: {e}"))?;
    Ok(decoder)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A pack of `files`, in memory (the archive's tests open packs made by it too).
    pub(crate) fn pack_of(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let listed: Vec<(String, u64)> = files.iter().map(|(p, b)| (p.to_string(), b.len() as u64)).collect();
        let mut out = Vec::new();
        write_pack(&mut out, &listed, |path, sink| {
            let bytes = &files.iter().find(|(p, _)| *p == path).unwrap().1;
            sink.write_all(bytes)?;
            Ok(bytes.len() as u64)
        })
        .unwrap();
        out
    }

    fn assert_restores_exactly(pack: &[u8], files: &[(&str, Vec<u8>)]) {
        let (index, start) = read_index(pack, u64::MAX).unwrap();
        let mut unpacked = Vec::new();
        unpack(&pack[start..], index.total(), &mut unpacked).unwrap();
        for (path, bytes) in files {
            assert_eq!(&unpacked[index.range(path).unwrap()], bytes.as_slice(), "{path}");
        }
    }

    /// Snapshots of one page as it changes a little: a list that grows by a line each time.
    fn snapshots(count: usize) -> Vec<(String, Vec<u8>)> {
        let base: String =
            (0..3000).map(|i| format!("<li class=\"item\">Row {i}: {}</li>\n", i * 7919 % 10007)).collect();
        (0..count)
            .map(|n| {
                let extra: String = (0..n).map(|i| format!("<p>added {i}</p>")).collect();
                (
                    format!("dom/{:06}.html", n + 1),
                    format!("<html><body><ul>{base}</ul>{extra}</body></html>").into_bytes(),
                )
            })
            .collect()
    }

    #[test]
    fn a_pack_restores_every_file_exactly() {
        let files = snapshots(5);
        let borrowed: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
        assert_restores_exactly(&pack_of(&borrowed), &borrowed);
    }

    #[test]
    fn similar_snapshots_cost_about_one_when_packed() {
        let files = snapshots(12);
        let borrowed: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
        let packed = pack_of(&borrowed).len();
        // What zipping them one by one costs: each deflated on its own.
        let one_by_one: usize = files
            .iter()
            .map(|(_, bytes)| {
                let mut deflated = zstd::stream::encode_all(bytes.as_slice(), 1).unwrap();
                deflated.shrink_to_fit();
                deflated.len()
            })
            .sum();
        let first_alone = zstd::stream::encode_all(files[0].1.as_slice(), LEVEL).unwrap().len();
        assert!(packed * 5 < one_by_one, "packed {packed} bytes, one by one {one_by_one}");
        assert!(packed < first_alone * 2, "packed {packed} bytes, the first snapshot alone {first_alone}");
    }

    /// Bytes as random as an image's compressed stream.
    fn image_like(seed: u32, len: usize) -> Vec<u8> {
        let mut state = seed | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect()
    }

    #[test]
    fn a_screenshot_seen_before_costs_a_few_bytes_and_each_is_restored_exactly() {
        let home = image_like(7, 24_000);
        let cart = image_like(11, 18_000);
        let files = [
            ("dom/000001.html", b"<html><body><h1>Shop</h1></body></html>".to_vec()),
            ("screenshots/000001.webp", home.clone()),
            ("screenshots/000002.webp", cart.clone()),
            // The page shown again, and a click that changed nothing on the screen.
            ("screenshots/000003.webp", home.clone()),
            ("screenshots/000004.webp", home.clone()),
        ];
        let pack = pack_of(&files);
        let distinct = home.len() + cart.len();
        assert!(pack.len() < distinct + 1024, "packed {} bytes, the distinct images are {distinct}", pack.len());
        assert_restores_exactly(&pack, &files);
    }

    #[test]
    fn only_snapshots_are_packed() {
        assert!(is_packed("dom/000001.html") && is_packed("dom/000001.a11y.json"));
        assert!(is_packed("screenshots/000002.webp"));
        for path in ["events.jsonl", "recording.har", "resources/ab12", "screenshots", "domain/x", "screenshotsx/1"] {
            assert!(!is_packed(path), "{path}");
        }
    }

    #[test]
    fn a_damaged_or_lying_pack_is_refused() {
        let pack = pack_of(&[("dom/000001.html", b"<p>one</p>".to_vec())]);
        assert!(read_index(b"PK\x03\x04", u64::MAX).unwrap_err().contains("not a TRACE snapshot pack"));
        assert!(read_index(&pack, 4).unwrap_err().contains("limit"));
        let (index, start) = read_index(&pack, u64::MAX).unwrap();
        let short = unpack(&pack[start..], index.total() - 1, &mut Vec::new()).unwrap_err();
        assert!(short.contains("more than the") && short.contains("its index says"), "{short}");
        let long = unpack(&pack[start..], index.total() + 1, &mut Vec::new()).unwrap_err();
        assert!(long.contains("index says"), "{long}");
        let mut outside = pack.clone();
        let at = outside.windows(4).position(|w| w == b"dom/").unwrap();
        outside[at..at + 4].copy_from_slice(b"../x");
        assert!(read_index(&outside, u64::MAX).unwrap_err().contains("not a snapshot's path"));
    }
}
