//! Line charts of the training curves as PNG files: a small rasteriser with a built-in 5×7
//! pixel font, encoded with the `png` crate (no system fonts, no C libraries).

use std::path::Path;

use crate::error::io;
use crate::{Result, TrainError};

const W: usize = 640;
const H: usize = 400;
const LEFT: usize = 80;
const RIGHT: usize = 24;
const TOP: usize = 44;
const BOTTOM: usize = 52;
const COLORS: [[u8; 3]; 4] = [
    [31, 119, 180],
    [214, 39, 40],
    [44, 160, 44],
    [148, 103, 189],
];

/// One named line of `(x, y)` points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from a name and points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
        }
    }
}

struct Canvas {
    px: Vec<u8>,
}

impl Canvas {
    fn new() -> Self {
        Self {
            px: vec![255; W * H * 3],
        }
    }

    fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if (0..W as i64).contains(&x) && (0..H as i64).contains(&y) {
            let at = (y as usize * W + x as usize) * 3;
            self.px[at..at + 3].copy_from_slice(&c);
        }
    }

    fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), c: [u8; 3], thick: bool) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            self.set(x, y, c);
            if thick {
                self.set(x + 1, y, c);
                self.set(x, y + 1, c);
            }
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Draws `text` with its top-left corner at `(x, y)`, each font pixel `scale` wide.
    fn text(&mut self, x: i64, y: i64, text: &str, scale: i64, c: [u8; 3]) {
        for (i, ch) in text.chars().enumerate() {
            let rows = glyph(ch);
            let ox = x + i as i64 * 6 * scale;
            for (r, bits) in rows.iter().enumerate() {
                for col in 0..5 {
                    if bits & (0b10000 >> col) != 0 {
                        for a in 0..scale {
                            for b in 0..scale {
                                self.set(ox + col * scale + a, y + r as i64 * scale + b, c);
                            }
                        }
                    }
                }
            }
        }
    }
}

fn text_width(text: &str, scale: i64) -> i64 {
    text.chars().count() as i64 * 6 * scale
}

/// A compact number for axis labels.
fn label(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Renders `series` as a line chart titled `title` into a PNG file at `path` (written to a
/// temporary file first, then renamed, so a reader never sees a half image).
pub fn line_chart(path: &Path, title: &str, x_label: &str, series: &[Series]) -> Result<()> {
    let mut c = Canvas::new();
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points.filter(|(x, y)| x.is_finite() && y.is_finite()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 - x0 < 1e-12 {
        x1 = x0 + 1.0;
    }
    if y1 - y0 < 1e-12 {
        (y0, y1) = (y0 - 0.5, y1 + 0.5);
    }
    let pad = (y1 - y0) * 0.05;
    (y0, y1) = (y0 - pad, y1 + pad);
    let (pw, ph) = ((W - LEFT - RIGHT) as f64, (H - TOP - BOTTOM) as f64);
    let to_px = |x: f64, y: f64| -> (i64, i64) {
        (
            LEFT as i64 + ((x - x0) / (x1 - x0) * pw).round() as i64,
            (TOP as f64 + (1.0 - (y - y0) / (y1 - y0)) * ph).round() as i64,
        )
    };
    let grey = [160, 160, 160];
    let light = [230, 230, 230];
    let black = [20, 20, 20];
    // Grid and labels: five horizontal lines, five vertical ones.
    for k in 0..=4 {
        let fy = y0 + (y1 - y0) * k as f64 / 4.0;
        let (_, py) = to_px(x0, fy);
        c.line((LEFT as i64, py), ((W - RIGHT) as i64, py), light, false);
        let text = label(fy);
        c.text(
            LEFT as i64 - 6 - text_width(&text, 1),
            py - 3,
            &text,
            1,
            black,
        );
        let fx = x0 + (x1 - x0) * k as f64 / 4.0;
        let (px, _) = to_px(fx, y0);
        c.line((px, TOP as i64), (px, (H - BOTTOM) as i64), light, false);
        let text = label(fx);
        c.text(
            px - text_width(&text, 1) / 2,
            (H - BOTTOM) as i64 + 6,
            &text,
            1,
            black,
        );
    }
    let (l, t, r, b) = (
        LEFT as i64,
        TOP as i64,
        (W - RIGHT) as i64,
        (H - BOTTOM) as i64,
    );
    for (p, q) in [
        ((l, t), (r, t)),
        ((r, t), (r, b)),
        ((r, b), (l, b)),
        ((l, b), (l, t)),
    ] {
        c.line(p, q, grey, false);
    }
    c.text((W as i64 - text_width(title, 2)) / 2, 12, title, 2, black);
    c.text(
        (W as i64 - text_width(x_label, 1)) / 2,
        H as i64 - 22,
        x_label,
        1,
        black,
    );
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(i64, i64)> = s
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| to_px(x, y))
            .collect();
        for w in pts.windows(2) {
            c.line(w[0], w[1], color, true);
        }
        if let [only] = pts.as_slice() {
            c.line(*only, (only.0 + 1, only.1), color, true);
        }
        // Legend, top-left inside the plot.
        let ly = t + 8 + i as i64 * 12;
        c.line((l + 8, ly + 3), (l + 24, ly + 3), color, true);
        c.text(l + 30, ly, &s.name, 1, black);
    }
    write_png(path, &c.px)
}

fn write_png(path: &Path, rgb: &[u8]) -> Result<()> {
    let tmp = path.with_extension("png.tmp");
    let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), W as u32, H as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let encode = |e: png::EncodingError| TrainError::Run {
        path: tmp.clone(),
        reason: format!("png encoding failed: {e}"),
    };
    let mut writer = encoder.write_header().map_err(encode)?;
    writer.write_image_data(rgb).map_err(encode)?;
    writer.finish().map_err(encode)?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// The 5×7 bitmap of a character (upper case is drawn as lower case; unknown as a box).
fn glyph(ch: char) -> [u8; 7] {
    match ch.to_ascii_lowercase() {
        '0' => [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E],
        '1' => [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        '2' => [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F],
        '3' => [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        '4' => [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02],
        '5' => [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        '6' => [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E],
        '7' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        '8' => [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E],
        '9' => [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        'a' => [0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F],
        'b' => [0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E],
        'c' => [0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E],
        'd' => [0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F],
        'e' => [0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E],
        'f' => [0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08],
        'g' => [0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E],
        'h' => [0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11],
        'i' => [0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E],
        'j' => [0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C],
        'k' => [0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12],
        'l' => [0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E],
        'm' => [0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11],
        'n' => [0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11],
        'o' => [0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E],
        'p' => [0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10],
        'q' => [0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01],
        'r' => [0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10],
        's' => [0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E],
        't' => [0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06],
        'u' => [0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D],
        'v' => [0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04],
        'w' => [0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A],
        'x' => [0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11],
        'y' => [0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E],
        'z' => [0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F],
        '.' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C],
        ',' => [0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08],
        '-' => [0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00],
        '_' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F],
        '+' => [0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00],
        '=' => [0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00],
        ':' => [0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00],
        '/' => [0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00],
        '(' => [0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02],
        ')' => [0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08],
        '%' => [0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03],
        ' ' => [0; 7],
        _ => [0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F],
    }
}
