//! The extension's icons (`static/icons/icon-<size>.png`, named by `manifest.json`'s `icons` and
//! `action.default_icon`), drawn here from a few shapes rather than kept as hand-made images: a dark
//! rounded square holding a white ring around a red dot, a recording under way. A test draws them and
//! compares them, pixel by pixel, with the committed files; `UPDATE_ICONS=1 cargo test -p trace-extension
//! icons` writes them anew after a change to the drawing.

use std::path::PathBuf;

/// The sizes Chrome asks for: the toolbar (16, 32 on high-density screens), the extensions page (48) and
/// the Web Store and installation (128).
const SIZES: [u32; 4] = [16, 32, 48, 128];
/// Samples per pixel along each axis: edges are the share of samples inside a shape.
const SAMPLES: u32 = 4;

const BACKGROUND: [u8; 3] = [0x1f, 0x3a, 0x5f];
const RING: [u8; 3] = [0xff, 0xff, 0xff];
const DOT: [u8; 3] = [0xe5, 0x39, 0x35];

/// The icon at `size` pixels square, RGBA.
fn draw(size: u32) -> image::RgbaImage {
    image::RgbaImage::from_fn(size, size, |x, y| {
        let mut sum = [0.0f64; 4];
        for sub_y in 0..SAMPLES {
            for sub_x in 0..SAMPLES {
                // The sample's place in the unit square, the icon's centre at (0.5, 0.5).
                let u = (f64::from(x) + (f64::from(sub_x) + 0.5) / f64::from(SAMPLES)) / f64::from(size);
                let v = (f64::from(y) + (f64::from(sub_y) + 0.5) / f64::from(SAMPLES)) / f64::from(size);
                if let Some(colour) = colour_at(u, v) {
                    for (total, channel) in sum.iter_mut().zip(colour) {
                        *total += f64::from(channel);
                    }
                    sum[3] += 255.0;
                }
            }
        }
        let samples = f64::from(SAMPLES * SAMPLES);
        let alpha = sum[3] / samples;
        let channel = |total: f64| if alpha == 0.0 { 0 } else { (total / samples * 255.0 / alpha).round() as u8 };
        image::Rgba([channel(sum[0]), channel(sum[1]), channel(sum[2]), alpha.round() as u8])
    })
}

/// The colour at (`u`, `v`) of the unit square, or `None` outside the icon.
fn colour_at(u: f64, v: f64) -> Option<[u8; 3]> {
    let (dx, dy) = (u - 0.5, v - 0.5);
    // A square whose corners are rounded with a radius of a fifth of its side, filling the icon.
    let corner = 0.2;
    let (qx, qy) = ((dx.abs() - (0.5 - corner)).max(0.0), (dy.abs() - (0.5 - corner)).max(0.0));
    if qx.hypot(qy) > corner {
        return None;
    }
    let distance = dx.hypot(dy);
    Some(match distance {
        d if d <= 0.2 => DOT,
        d if (0.28..=0.36).contains(&d) => RING,
        _ => BACKGROUND,
    })
}

fn path_of(size: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("static/icons/icon-{size}.png"))
}

#[test]
fn the_committed_icons_are_the_ones_drawn_here() {
    let update = std::env::var_os("UPDATE_ICONS").is_some_and(|v| !v.is_empty());
    for size in SIZES {
        let drawn = draw(size);
        let path = path_of(size);
        if update {
            std::fs::create_dir_all(path.parent().expect("a folder")).expect("the icons' folder");
            drawn.save(&path).expect("the icon is written");
            continue;
        }
        let committed = image::open(&path)
            .unwrap_or_else(|error| panic!("{}: {error} (UPDATE_ICONS=1 draws it)", path.display()))
            .to_rgba8();
        assert!(committed == drawn, "{} is not the icon drawn here: UPDATE_ICONS=1 draws it anew", path.display());
    }
}

#[test]
fn the_manifest_names_every_icon() {
    let manifest: serde_json::Value =
        serde_json::from_str(include_str!("../static/manifest.json")).expect("manifest.json parses");
    for size in SIZES {
        let file = format!("icons/icon-{size}.png");
        assert_eq!(manifest["icons"][size.to_string()], file.as_str());
        assert_eq!(manifest["action"]["default_icon"][size.to_string()], file.as_str());
    }
}
