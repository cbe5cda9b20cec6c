//! Text in the figures. plotters' `ab_glyph` backend measures and rasterises text with fonts
//! registered by name; it never asks fontconfig, so a headless machine only needs the font file
//! (Debian `fonts-dejavu-core`, installed by `slurm-conf/install-deps`).

use crate::error::{ReportError, Result};
use plotters::style::FontStyle;
use std::sync::OnceLock;

/// Where the regular and bold faces are looked for, first hit wins. `CMLB_FONT` (a .ttf path)
/// overrides the regular face.
const REGULAR: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];
const BOLD: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/TTF/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf",
];

static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// Register the fonts once per process under the family the figures use ("sans-serif").
pub fn ensure() -> Result<()> {
    REGISTERED
        .get_or_init(register)
        .clone()
        .map_err(ReportError::Font)
}

fn load(candidates: &[&str], env: Option<&str>) -> std::result::Result<(String, Vec<u8>), String> {
    let mut tried = Vec::new();
    // A font the user named must be used or refused, never silently replaced.
    if let Some((var, path)) = env.and_then(|v| Some(v).zip(std::env::var(v).ok())) {
        if !path.is_empty() {
            return std::fs::read(&path)
                .map(|b| (path.clone(), b))
                .map_err(|e| format!("{var}={path}: {e}"));
        }
    }
    for path in candidates.iter().copied() {
        match std::fs::read(path) {
            Ok(bytes) => return Ok((path.to_string(), bytes)),
            Err(_) => tried.push(path.to_string()),
        }
    }
    Err(format!(
        "no TrueType font found (tried {}); install Debian's fonts-dejavu-core or set CMLB_FONT to a .ttf file",
        tried.join(", ")
    ))
}

fn register() -> std::result::Result<(), String> {
    let (path, regular) = load(REGULAR, Some("CMLB_FONT"))?;
    // plotters keeps `&'static` font data; the few hundred KiB live as long as the process.
    let regular: &'static [u8] = Box::leak(regular.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, regular)
        .map_err(|_| format!("{path}: not a usable TrueType font"))?;
    let bold = match load(BOLD, None) {
        Ok((_, b)) => Box::leak(b.into_boxed_slice()),
        Err(_) => regular,
    };
    plotters::style::register_font("sans-serif", FontStyle::Bold, bold)
        .or_else(|_| plotters::style::register_font("sans-serif", FontStyle::Bold, regular))
        .map_err(|_| format!("{path}: not a usable TrueType font"))?;
    Ok(())
}
