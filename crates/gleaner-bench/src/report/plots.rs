//! PNG plots of a run: the time series (throughput, disk usage, device I/O: what the Scavenger
//! paper shows over time) and grouped bars per phase (throughput, write and space amplification,
//! as in its per-phase figures). Sizes are fixed and modest because the files go into git.

use std::error::Error;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, register_font};

use super::ReportError;
use super::format;
use super::select::PhaseKey;
use crate::results::{PhaseResult, Results, Sample};

/// Inside a drawing function any plotters error is just reported; `plots` adds the file name.
type DrawResult = Result<(), Box<dyn Error>>;
type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
type Chart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One plot file: its name, the title `report.md` gives it, and how to draw it.
pub(super) struct Plot {
    pub file: &'static str,
    pub title: &'static str,
    draw: fn(&Path, &Results) -> DrawResult,
}

/// Every plot, in the order `plots` writes them and `report.md` shows them.
pub(super) const PLOTS: [Plot; 9] = [
    Plot {
        file: "throughput.png",
        title: "Throughput over time",
        draw: throughput,
    },
    Plot {
        file: "disk.png",
        title: "Disk usage over time",
        draw: disk,
    },
    Plot {
        file: "device_io.png",
        title: "Device I/O over time",
        draw: device_io,
    },
    Plot {
        file: "bars_ops_per_sec.png",
        title: "Throughput per phase",
        draw: bars_ops_per_sec,
    },
    Plot {
        file: "bars_write_amp.png",
        title: "Write amplification per phase",
        draw: bars_write_amp,
    },
    Plot {
        file: "bars_space_amp.png",
        title: "Space amplification per phase",
        draw: bars_space_amp,
    },
    Plot {
        file: "bars_gc_read.png",
        title: "GC read bytes per phase",
        draw: bars_gc_read,
    },
    Plot {
        file: "bars_gc_write.png",
        title: "GC write bytes per phase",
        draw: bars_gc_write,
    },
    Plot {
        file: "bars_gc_jobs.png",
        title: "GC jobs per phase",
        draw: bars_gc_jobs,
    },
];

const SIZE: (u32, u32) = (800, 480);
/// The device I/O plot has two panels (writes above reads) and needs a little more height.
const TALL_SIZE: (u32, u32) = (800, 640);
const FONT: &str = "sans-serif";
const FONT_FILE: &str = "crates/gleaner-bench/assets/DejaVuSans.ttf";
/// Embedded so plots look the same on every machine and need no system fonts.
static FONT_BYTES: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Tableau 10: distinguishable colours, assigned by engine position so they are stable.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn color(engine: usize) -> RGBColor {
    PALETTE[engine % PALETTE.len()]
}

/// Writes every plot into `dir` (created if needed) and returns their paths in `PLOTS` order.
/// With no engines there is nothing to plot: no files, an empty list. Engines without samples
/// or phases give empty charts rather than errors.
pub fn plots(dir: &Path, results: &Results) -> Result<Vec<PathBuf>, ReportError> {
    if results.engines.is_empty() {
        return Ok(Vec::new());
    }
    ensure_font()?;
    fs::create_dir_all(dir).map_err(|e| ReportError::write(dir, e))?;
    let mut written = Vec::with_capacity(PLOTS.len());
    for plot in &PLOTS {
        let path = dir.join(plot.file);
        (plot.draw)(&path, results).map_err(|e| ReportError::plot(&path, e))?;
        written.push(path);
    }
    Ok(written)
}

/// Registers the embedded font under the family every text style here uses. plotters keeps
/// fonts in a process-wide table, so this happens once per process.
fn ensure_font() -> Result<(), ReportError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    if *REGISTERED.get_or_init(|| register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok()) {
        Ok(())
    } else {
        Err(ReportError::plot(
            Path::new(FONT_FILE),
            "the embedded font is not a valid TrueType font",
        ))
    }
}

// ---- time series -------------------------------------------------------------------------

/// Per engine, the finite `(t, y)` points of its samples. NaN or infinite values (a broken
/// sampler) are skipped rather than stretching the axes to nothing.
fn series(r: &Results, y: impl Fn(&Sample) -> f64) -> Vec<Vec<(f64, f64)>> {
    r.engines
        .iter()
        .map(|e| {
            e.timeseries
                .iter()
                .map(|s| (s.t, y(s)))
                .filter(|(t, y)| t.is_finite() && y.is_finite())
                .collect()
        })
        .collect()
}

/// Upper ends of the axes: at least 1 so that empty or all-zero series still give a valid range.
fn extent(lines: &[Vec<(f64, f64)>]) -> (f64, f64) {
    let points = lines.iter().flatten();
    let x = points.clone().map(|p| p.0).fold(0.0, f64::max);
    let y = points.map(|p| p.1).fold(0.0, f64::max);
    (pad(x, 1.0), pad(y, 1.08))
}

fn pad(max: f64, headroom: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * headroom
    } else {
        1.0
    }
}

fn time_axes<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    y_desc: &str,
    (x_max, y_max): (f64, f64),
    legend_width: u32,
) -> Result<Chart<'a, 'b>, Box<dyn Error>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 20))
        .margin(10)
        .margin_right(legend_width + 10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc(y_desc)
        .y_label_formatter(&|v| format::compact(*v))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    Ok(chart)
}

/// One line per engine, in the engine's colour.
fn draw_lines(chart: &mut Chart<'_, '_>, lines: &[Vec<(f64, f64)>]) -> DrawResult {
    for (i, points) in lines.iter().enumerate() {
        chart.draw_series(LineSeries::new(
            points.iter().copied(),
            color(i).stroke_width(2),
        ))?;
    }
    Ok(())
}

/// How a legend entry is marked.
#[derive(Clone, Copy)]
enum Marker {
    Line(RGBColor),
    Dashed(RGBColor),
    Bar(RGBColor),
}

/// Draws a legend in the margin right of the plot (reserved with [`legend_width`]): inside the
/// plot it would hide phase names or lines wherever it went. plotters' own legend cannot do
/// this (it clamps everything to the plotting area), so it is drawn here on the whole image.
fn legend<CT: CoordTranslate>(
    root: &Area<'_>,
    chart: &ChartContext<'_, BitMapBackend<'_>, CT>,
    entries: &[(String, Marker)],
) -> DrawResult {
    let (x0, y0) = chart.plotting_area().get_base_pixel();
    let plot_width = i32::try_from(chart.plotting_area().dim_in_pixel().0).unwrap_or(0);
    let x = x0 + plot_width + 15;
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (row, (name, marker)) in entries.iter().enumerate() {
        let y = y0 + 10 + 20 * row as i32;
        match *marker {
            Marker::Line(c) => {
                root.draw(&PathElement::new(
                    vec![(x, y), (x + 22, y)],
                    c.stroke_width(2),
                ))?;
            }
            Marker::Dashed(c) => {
                for dash in [x, x + 9, x + 18] {
                    root.draw(&PathElement::new(
                        vec![(dash, y), (dash + 5, y)],
                        c.stroke_width(2),
                    ))?;
                }
            }
            Marker::Bar(c) => {
                root.draw(&Rectangle::new(
                    [(x + 5, y - 6), (x + 17, y + 6)],
                    c.filled(),
                ))?;
            }
        }
        root.draw(&Text::new(name.clone(), (x + 30, y), style.clone()))?;
    }
    Ok(())
}

/// The engines' legend entries, each in its engine's colour.
fn engine_entries(r: &Results, marker: fn(RGBColor) -> Marker) -> Vec<(String, Marker)> {
    r.engines
        .iter()
        .enumerate()
        .map(|(i, e)| (legend_name(&e.name), marker(color(i))))
        .collect()
}

/// Longest engine name a legend shows in full; longer specs are cut with `…` so that the plot
/// keeps most of the width.
const LEGEND_NAME_CHARS: usize = 32;

fn legend_name(name: &str) -> String {
    if name.chars().count() <= LEGEND_NAME_CHARS {
        name.to_string()
    } else {
        let mut cut: String = name.chars().take(LEGEND_NAME_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}

/// Pixels to reserve right of the plot for the legend: the widest entry plus the marker and
/// gaps drawn by [`legend`].
fn legend_width(area: &Area<'_>, entries: &[(String, Marker)]) -> u32 {
    let style = TextStyle::from((FONT, 13).into_font());
    let widest = entries
        .iter()
        .map(|(n, _)| {
            area.estimate_text_size(n, &style)
                .map_or(8 * n.chars().count() as u32, |(w, _)| w)
        })
        .max()
        .unwrap_or(0);
    widest + 50
}

/// Where each phase of an engine starts: as the run recorded it (`PhaseResult::started_at`),
/// or in older results, inferred from the samples.
fn engine_phase_starts(engine: &crate::results::EngineResult) -> Vec<(f64, &str)> {
    let recorded: Vec<(f64, &str)> = engine
        .phases
        .iter()
        .filter_map(|p| Some((p.started_at.filter(|t| t.is_finite())?, p.name.as_str())))
        .collect();
    if recorded.is_empty() {
        phase_starts(&engine.timeseries)
    } else {
        recorded
    }
}

/// Where each phase of an engine starts, from its samples: halfway between the last sample of
/// one phase and the first of the next (a sample covers the interval before its `t`). The
/// first phase starts at 0.
fn phase_starts(samples: &[Sample]) -> Vec<(f64, &str)> {
    let mut starts: Vec<(f64, &str)> = Vec::new();
    let mut previous: Option<&Sample> = None;
    for s in samples.iter().filter(|s| s.t.is_finite()) {
        match previous {
            None => starts.push((0.0, &s.phase)),
            Some(p) if p.phase != s.phase => starts.push(((p.t + s.t) / 2.0, &s.phase)),
            Some(_) => {}
        }
        previous = Some(s);
    }
    starts
}

/// Phase boundaries: a dashed vertical line in the engine's colour where each phase starts, and
/// the phase name at its top. Engines run phases at different speeds, so every engine gets its
/// own marks; names are staggered by engine so they do not print over each other.
fn phase_marks(chart: &mut Chart<'_, '_>, r: &Results, y_max: f64) -> DrawResult {
    for (i, engine) in r.engines.iter().enumerate() {
        let c = color(i);
        for (x, name) in engine_phase_starts(engine) {
            if x > 0.0 {
                chart.draw_series(DashedLineSeries::new(
                    [(x, 0.0), (x, y_max)],
                    6,
                    4,
                    c.mix(0.7).stroke_width(1),
                ))?;
            }
            let label = EmptyElement::at((x, y_max))
                + Text::new(
                    name.to_string(),
                    (4, 4 + 15 * (i as i32 % 8)),
                    (FONT, 12).into_font().color(&c),
                );
            chart.draw_series(std::iter::once(label))?;
        }
    }
    Ok(())
}

fn throughput(path: &Path, r: &Results) -> DrawResult {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let lines = series(r, |s| s.ops_per_sec);
    let ext = extent(&lines);
    let entries = engine_entries(r, Marker::Line);
    let width = legend_width(&root, &entries);
    let mut chart = time_axes(&root, "Throughput (ops/s)", "ops/s", ext, width)?;
    phase_marks(&mut chart, r, ext.1)?;
    draw_lines(&mut chart, &lines)?;
    legend(&root, &chart, &entries)?;
    root.present()?;
    Ok(())
}

/// The binary unit that keeps `max` bytes between 1 and 1024 (for axis labels).
fn byte_unit(max: f64) -> (f64, &'static str) {
    const UNITS: [(f64, &str); 4] = [
        (1_099_511_627_776.0, "TiB"),
        (1_073_741_824.0, "GiB"),
        (1_048_576.0, "MiB"),
        (1024.0, "KiB"),
    ];
    UNITS
        .into_iter()
        .find(|(size, _)| max >= *size)
        .unwrap_or((1.0, "B"))
}

fn disk(path: &Path, r: &Results) -> DrawResult {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let w = &r.workload;
    // A zero budget (no dataset) would only squash the plot against the axis.
    let budget = match (w.space_budget, w.budget_bytes()) {
        (Some(multiple), Some(bytes)) if bytes > 0 => Some((multiple, bytes as f64)),
        _ => None,
    };
    let raw = series(r, |s| s.disk_bytes as f64);
    let (_, raw_max) = extent(&raw);
    let (unit, unit_name) = byte_unit(raw_max.max(budget.map_or(0.0, |b| b.1)));
    let lines: Vec<Vec<(f64, f64)>> = raw
        .iter()
        .map(|l| l.iter().map(|&(t, b)| (t, b / unit)).collect())
        .collect();
    let (x_max, mut y_max) = extent(&lines);
    if let Some((_, bytes)) = budget {
        y_max = y_max.max(bytes / unit * 1.08);
    }
    let mut entries = engine_entries(r, Marker::Line);
    if let Some((multiple, _)) = budget {
        let label = format!("budget ({} dataset)", format::ratio(multiple));
        entries.push((label, Marker::Dashed(BLACK)));
    }
    let width = legend_width(&root, &entries);
    let mut chart = time_axes(&root, "Disk usage", unit_name, (x_max, y_max), width)?;
    phase_marks(&mut chart, r, y_max)?;
    draw_lines(&mut chart, &lines)?;
    if let Some((_, bytes)) = budget {
        let y = bytes / unit;
        chart.draw_series(DashedLineSeries::new(
            [(0.0, y), (x_max, y)],
            8,
            5,
            BLACK.stroke_width(2),
        ))?;
    }
    legend(&root, &chart, &entries)?;
    root.present()?;
    Ok(())
}

fn device_io(path: &Path, r: &Results) -> DrawResult {
    let root = BitMapBackend::new(path, TALL_SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(TALL_SIZE.1 / 2);
    let written = series(r, |s| s.device_write_mb_s);
    let read = series(r, |s| s.device_read_mb_s);
    // One time axis for both panels, so a write burst and the reads it causes line up.
    let x_max = extent(&written).0.max(extent(&read).0);
    let entries = engine_entries(r, Marker::Line);
    let width = legend_width(&root, &entries);
    // The legend once, beside the top panel: both panels use the same colours.
    for (area, caption, lines, with_legend) in [
        (&top, "Device writes (MB/s)", &written, true),
        (&bottom, "Device reads (MB/s)", &read, false),
    ] {
        let mut chart = time_axes(area, caption, "MB/s", (x_max, extent(lines).1), width)?;
        draw_lines(&mut chart, lines)?;
        if with_legend {
            legend(&root, &chart, &entries)?;
        }
    }
    root.present()?;
    Ok(())
}

// ---- bars per phase ----------------------------------------------------------------------

/// The x axis of a bar chart: one unit-wide slot per phase, with a tick (and the phase's name)
/// at each slot's centre. Written by hand because plotters' `with_key_points` over an `f64`
/// range loses the label formatter, and segmented integer axes cannot place several bars
/// inside one slot.
struct GroupAxis {
    groups: usize,
}

impl Ranged for GroupAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let fraction = value / self.groups.max(1) as f64;
        // `as` saturates (and maps NaN to 0), so no value can overflow the pixel arithmetic.
        limit.0 + (fraction * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Only bold points: light points would draw a grid line through every group.
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        (0..self.groups).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> Range<f64> {
        0.0..self.groups.max(1) as f64
    }
}

fn bars_ops_per_sec(path: &Path, r: &Results) -> DrawResult {
    bars(
        path,
        r,
        "Throughput per phase",
        "ops/s",
        |p| p.ops_per_sec,
        None,
    )
}

fn bars_write_amp(path: &Path, r: &Results) -> DrawResult {
    bars(
        path,
        r,
        "Write amplification per phase",
        "device bytes written ÷ user bytes written",
        |p| p.write_amp,
        None,
    )
}

fn bars_space_amp(path: &Path, r: &Results) -> DrawResult {
    bars(
        path,
        r,
        "Space amplification per phase (filled: end, outline: peak)",
        "disk ÷ live bytes",
        |p| p.space.space_amp_end,
        Some(|p| p.space.space_amp_peak),
    )
}

const GIB: f64 = (1u64 << 30) as f64;

/// A GC figure of a phase, or NaN (no bar) for engines that report no GC figures.
fn gc_figure(p: &PhaseResult, f: fn(&crate::results::GcFigures) -> f64) -> f64 {
    p.gc.as_ref().map_or(f64::NAN, f)
}

/// Scavenger Fig. 14 (GC read I/O): value records read, and everything GC read.
fn bars_gc_read(path: &Path, r: &Results) -> DrawResult {
    bars(
        path,
        r,
        "GC reads (filled: value records; outline: plus indexes and lookups)",
        "GiB",
        |p| gc_figure(p, |g| g.value_bytes_read as f64 / GIB),
        Some(|p| {
            gc_figure(p, |g| {
                (g.value_bytes_read + g.index_bytes_read + g.lookup_bytes_read) as f64 / GIB
            })
        }),
    )
}

/// Scavenger Fig. 15 (GC write I/O): bytes written, of them to hot tables.
fn bars_gc_write(path: &Path, r: &Results) -> DrawResult {
    bars(
        path,
        r,
        "GC writes (filled: to hot tables; outline: all)",
        "GiB",
        |p| {
            gc_figure(p, |g| {
                g.bytes_written_by_class.get("hot").copied().unwrap_or(0) as f64 / GIB
            })
        },
        Some(|p| gc_figure(p, |g| g.bytes_written as f64 / GIB)),
    )
}

/// Scavenger Table 1 (GC count).
fn bars_gc_jobs(path: &Path, r: &Results) -> DrawResult {
    bars(
        path,
        r,
        "GC jobs per phase",
        "jobs",
        |p| gc_figure(p, |g| g.jobs as f64),
        None,
    )
}

fn phase_label(key: PhaseKey<'_>) -> String {
    if key.occurrence == 0 {
        key.name.to_string()
    } else {
        format!("{} (run {})", key.name, key.occurrence + 1)
    }
}

/// A value worth drawing as a bar: finite and not negative.
fn bar_value(x: f64) -> Option<f64> {
    (x.is_finite() && x >= 0.0).then_some(x)
}

/// Grouped bars: phases along x, one bar per engine within each phase, in engine order.
/// `outline`, when given, draws a second figure as an unfilled bar around the first (peak
/// around end). An engine that did not run a phase, or skipped it, has no bar there.
fn bars(
    path: &Path,
    r: &Results,
    caption: &str,
    y_desc: &str,
    value: fn(&PhaseResult) -> f64,
    outline: Option<fn(&PhaseResult) -> f64>,
) -> DrawResult {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let entries = engine_entries(r, Marker::Bar);
    let keys = r.phase_keys();
    let labels: Vec<String> = keys.iter().map(|&k| phase_label(k)).collect();
    let engines = r.engines.len().max(1) as f64;
    let y_max = pad(
        r.engines
            .iter()
            .flat_map(|e| e.phases.iter())
            .flat_map(|p| [Some(value(p)), outline.map(|f| f(p))])
            .flatten()
            .filter_map(bar_value)
            .fold(0.0, f64::max),
        1.1,
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, (FONT, 20))
        .margin(10)
        .margin_right(legend_width(&root, &entries) + 10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(GroupAxis { groups: keys.len() }, 0.0..y_max)?;
    let label_at = |x: &f64| {
        // Key points sit at group centres i + 0.5; map back to the phase name.
        let i = (x - 0.5).round();
        if i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&label_at)
        .y_desc(y_desc)
        .y_label_formatter(&|v| format::compact(*v))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;

    // Each group is 0.8 wide, centred in its unit slot, split evenly among the engines.
    let width = 0.8 / engines;
    for (j, engine) in r.engines.iter().enumerate() {
        let c = color(j);
        let span = |i: usize| {
            let x0 = i as f64 + 0.1 + j as f64 * width;
            (x0, x0 + width * 0.92)
        };
        // A skipped phase's figures are zeros that mean nothing: no bar, as for a phase not run.
        let ran = |k| engine.phase(k).filter(|p| p.skipped.is_none());
        let filled = keys.iter().enumerate().filter_map(|(i, &k)| {
            let v = bar_value(value(ran(k)?))?;
            let (x0, x1) = span(i);
            Some(Rectangle::new([(x0, 0.0), (x1, v)], c.filled()))
        });
        chart.draw_series(filled)?;
        if let Some(outline) = outline {
            let outlined = keys.iter().enumerate().filter_map(|(i, &k)| {
                let v = bar_value(outline(ran(k)?))?;
                let (x0, x1) = span(i);
                Some(Rectangle::new([(x0, 0.0), (x1, v)], c.stroke_width(2)))
            });
            chart.draw_series(outlined)?;
        }
    }
    legend(&root, &chart, &entries)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

    fn assert_pngs(dir: &Path, written: &[PathBuf]) {
        let expected: Vec<PathBuf> = PLOTS.iter().map(|p| dir.join(p.file)).collect();
        assert_eq!(written, expected);
        for path in written {
            let bytes = fs::read(path).unwrap();
            assert!(
                bytes.starts_with(PNG_SIGNATURE),
                "{} is not a PNG",
                path.display()
            );
            // Small enough to commit: a plain 800×640 RGB chart compresses far below this.
            assert!(
                bytes.len() < 400_000,
                "{} is {} bytes",
                path.display(),
                bytes.len()
            );
        }
    }

    #[test]
    fn report_plots_writes_every_png() {
        let dir = tempfile::tempdir().unwrap();
        let written = plots(dir.path(), &fixture::results()).unwrap();
        assert_pngs(dir.path(), &written);
    }

    #[test]
    fn report_plots_without_engines_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(plots(dir.path(), &Results::default()).unwrap().is_empty());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn report_plots_survive_empty_and_odd_series() {
        let dir = tempfile::tempdir().unwrap();
        let mut results = fixture::results();
        // An engine with no samples, one with no phases either, NaN in a sample and a phase,
        // and a budget without a dataset.
        results.engines[2].timeseries.clear();
        results.engines[1].timeseries[0].ops_per_sec = f64::NAN;
        results.engines[0].phases[0].write_amp = f64::INFINITY;
        results.engines.push(crate::results::EngineResult {
            name: "empty".to_string(),
            kind: "fjall".to_string(),
            ..Default::default()
        });
        let written = plots(dir.path(), &results).unwrap();
        assert_pngs(dir.path(), &written);

        // Engines but not a single sample or phase anywhere.
        for e in &mut results.engines {
            e.timeseries.clear();
            e.phases.clear();
        }
        results.workload.load_bytes = 0;
        let written = plots(dir.path(), &results).unwrap();
        assert_pngs(dir.path(), &written);
    }

    #[test]
    fn report_plots_draw_a_run_with_a_skipped_phase() {
        let dir = tempfile::tempdir().unwrap();
        let written = plots(dir.path(), &fixture::with_delete_range()).unwrap();
        assert_pngs(dir.path(), &written);
    }

    #[test]
    fn report_phase_starts_halfway_between_samples() {
        let results = fixture::results();
        let starts = phase_starts(&results.engines[0].timeseries);
        assert_eq!(starts, [(0.0, "load"), (2.5, "update"), (4.5, "read")]);
    }

    #[test]
    fn report_phase_starts_as_recorded_when_the_run_recorded_them() {
        let mut results = fixture::results();
        let engine = &mut results.engines[0];
        for (p, t) in engine.phases.iter_mut().zip([0.25, 2.75, 4.0]) {
            p.started_at = Some(t);
        }
        let names: Vec<String> = engine.phases.iter().map(|p| p.name.clone()).collect();
        let starts = engine_phase_starts(engine);
        let want: Vec<(f64, &str)> = [0.25, 2.75, 4.0]
            .into_iter()
            .zip(names.iter().map(String::as_str))
            .collect();
        assert_eq!(starts, want);
    }

    #[test]
    fn report_unwritable_directory_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        fs::write(&blocker, "not a directory").unwrap();
        let err = plots(&blocker, &fixture::results()).unwrap_err();
        assert!(err.to_string().contains("file"), "{err}");
    }
}
