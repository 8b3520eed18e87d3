//! Line charts of the training curves as PNG files, drawn by plotters into an RGB buffer and
//! encoded with the `png` crate. Text is set in DejaVu Sans, compiled in (the `dejavu`
//! crate) and registered with plotters' `ab_glyph` renderer, so no system fonts or C
//! libraries are needed.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

use crate::error::io;
use crate::{Result, TrainError};

const W: u32 = 640;
const H: u32 = 400;
const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
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

/// Registers the compiled-in font as plotters' `sans-serif`, once per process.
fn register_font() {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        // The bytes are a valid TrueType font (the `dejavu` crate's own file).
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// The ranges that hold every finite point of `series`, padded; a flat or empty range is
/// widened so the chart still has an extent.
fn ranges(series: &[Series]) -> ((f64, f64), (f64, f64)) {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|(x, y)| x.is_finite() && y.is_finite())
    {
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
    ((x0, x1), (y0 - pad, y1 + pad))
}

/// Draws `series` as a line chart titled `title` to the PNG file `path` (written beside, then
/// renamed into place). Non-finite points are left out.
pub fn line_chart(path: &Path, title: &str, x_label: &str, series: &[Series]) -> Result<()> {
    register_font();
    let mut rgb = vec![255u8; (W * H * 3) as usize];
    let fail = |e: String| TrainError::Run {
        path: path.to_owned(),
        reason: format!("drawing the chart failed: {e}"),
    };
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (W, H)).into_drawing_area();
        let ((x0, x1), (y0, y1)) = ranges(series);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| fail(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .x_labels(6)
            .y_labels(6)
            .light_line_style(RGBColor(238, 238, 238))
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(|e| fail(e.to_string()))?;
        for (i, s) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            let single = points.len() == 1;
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| fail(e.to_string()))?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            if single {
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| fail(e.to_string()))?;
            }
        }
        if !series.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(200, 200, 200))
                .label_font(("sans-serif", 13))
                .draw()
                .map_err(|e| fail(e.to_string()))?;
        }
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    write_png(path, &rgb)
}

fn write_png(path: &Path, rgb: &[u8]) -> Result<()> {
    let tmp = path.with_extension("png.tmp");
    let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), W, H);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pixels(path: &Path) -> Vec<u8> {
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (W, H));
        buf.truncate(info.buffer_size());
        buf
    }

    #[test]
    fn a_chart_draws_its_lines_text_and_legend_and_survives_odd_data() {
        let dir = std::env::temp_dir().join(format!("sandgym-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.png");
        let up = Series::new(
            "reward",
            (0..10).map(|i| (i as f64, i as f64 / 10.0)).collect(),
        );
        let odd = Series::new(
            "with gaps",
            vec![
                (0.0, f64::NAN),
                (1.0, 0.5),
                (2.0, f64::INFINITY),
                (3.0, 0.2),
            ],
        );
        line_chart(&path, "Reward per iteration", "iteration", &[up, odd]).unwrap();
        let px = pixels(&path);
        let count = |c: RGBColor| {
            px.chunks(3)
                .filter(|p| p[0] == c.0 && p[1] == c.1 && p[2] == c.2)
                .count()
        };
        assert!(count(COLORS[0]) > 300, "the first line is drawn");
        assert!(count(COLORS[1]) > 100, "the second line is drawn");
        let dark = px.chunks(3).filter(|p| p.iter().all(|&v| v < 80)).count();
        assert!(dark > 500, "text and axes are drawn ({dark} dark pixels)");
        // No data, one point, a flat line: still a chart, never a panic.
        for series in [
            vec![],
            vec![Series::new("one", vec![(3.0, 1.0)])],
            vec![Series::new("flat", vec![(0.0, 2.0), (1.0, 2.0)])],
        ] {
            line_chart(&path, "edge", "x", &series).unwrap();
        }
        let flat = pixels(&path);
        assert!(
            flat.chunks(3).any(|p| p == [31, 119, 180]),
            "the flat line is drawn"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
