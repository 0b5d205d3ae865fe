//! Figures as hand-written SVG: collective latency against message size (log-log,
//! one series per world size, with the fitted α-β line), and decode step time per
//! world size split into compute and communication (stacked bars).

use super::facts::{CollRow, DecodeRow, Fit};
use super::fmt::slug;
use crate::spec::link::Link;
use crate::spec::schema::HeadPlacement;
use crate::xml::escape as esc;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One figure: its file (relative to the register), a caption, and the SVG text.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Path relative to the register, `figures/<name>.svg`.
    pub file: String,
    /// What it shows.
    pub alt: String,
    /// The SVG document.
    pub svg: String,
}

const W: f64 = 680.0;
const H: f64 = 420.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];

fn open(title: &str) -> String {
    let mut s = crate::xml::svg_open(W, H, 12);
    let _ =
        writeln!(s, r#"<text x="{:.1}" y="22" text-anchor="middle" font-size="14">{}</text>"#, LEFT + (W - LEFT - RIGHT) / 2.0, esc(title));
    s
}

/// A log10 axis over whole decades covering `[lo, hi]`.
struct LogAxis {
    lo: i32,
    hi: i32,
}

impl LogAxis {
    fn new(min: f64, max: f64) -> LogAxis {
        let lo = min.max(1e-300).log10().floor() as i32;
        let hi = (max.max(1e-300).log10().ceil() as i32).max(lo + 1);
        LogAxis { lo, hi }
    }

    fn frac(&self, v: f64) -> f64 {
        (v.max(1e-300).log10() - self.lo as f64) / (self.hi - self.lo) as f64
    }
}

fn decade_bytes(k: i32) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let i = (k.max(0) / 3) as usize;
    if i >= UNITS.len() {
        return format!("1e{k} B");
    }
    format!("{} {}", 10u64.pow((k.max(0) % 3) as u32), UNITS[i])
}

fn decade_seconds(k: i32) -> String {
    const UNITS: [&str; 4] = ["ns", "µs", "ms", "s"];
    let i = (k + 9).div_euclid(3);
    if !(0..4).contains(&i) {
        return format!("1e{k} s");
    }
    format!("{} {}", 10u64.pow((k + 9).rem_euclid(3) as u32), UNITS[i as usize])
}

/// (experiment, op order, op, link): one collectives figure.
type FigureKey = (String, usize, String, Link);

/// Latency against message size, one figure per (experiment, op, link).
pub fn collectives(rows: &[CollRow], fits: &[Fit]) -> Vec<Figure> {
    let mut groups: BTreeMap<FigureKey, BTreeMap<u32, Vec<(u64, f64)>>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.size > 0 && r.time.median > 0.0) {
        let key = (r.experiment.clone(), super::facts::op_order(r.op), r.op.name().to_string(), r.link.clone());
        groups.entry(key).or_default().entry(r.world).or_default().push((r.size, r.time.median));
    }
    groups
        .into_iter()
        .map(|((experiment, _, op, link), mut series)| {
            for pts in series.values_mut() {
                pts.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
            }
            let lines: BTreeMap<u32, &Fit> = fits
                .iter()
                .filter(|f| f.experiment == experiment && f.fit.op.name() == op && f.link == link)
                .map(|f| (f.fit.world, f))
                .collect();
            let svg = latency_svg(&format!("{op} on {link} ({experiment})"), &series, &lines);
            let with_fit = if lines.keys().any(|w| series.contains_key(w)) { ", with the fitted α-β line" } else { "" };
            Figure {
                file: format!("figures/{}-{}-{}.svg", slug(&experiment), slug(&op), slug(link.name())),
                alt: format!("{op} latency against message size on {link}, per world size{with_fit} (experiment {experiment})"),
                svg,
            }
        })
        .collect()
}

fn fit_points(fit: &Fit, lo: u64, hi: u64) -> Vec<(f64, f64)> {
    let (a, b) = ((lo.max(1) as f64).ln(), (hi.max(1) as f64).ln());
    (0..=24).map(|i| (a + (b - a) * i as f64 / 24.0).exp()).map(|x| (x, fit.fit.predict(x))).collect()
}

fn latency_svg(title: &str, series: &BTreeMap<u32, Vec<(u64, f64)>>, fits: &BTreeMap<u32, &Fit>) -> String {
    let sizes = series.values().flatten().map(|p| p.0);
    let (xmin, xmax) = (sizes.clone().min().unwrap_or(1), sizes.max().unwrap_or(1));
    let mut ys: Vec<f64> = series.values().flatten().map(|p| p.1).collect();
    for (w, f) in fits {
        if series.contains_key(w) {
            ys.extend(fit_points(f, xmin, xmax).into_iter().map(|p| p.1).filter(|y| *y > 0.0));
        }
    }
    let xa = LogAxis::new(xmin as f64, xmax as f64);
    let ya = LogAxis::new(ys.iter().cloned().fold(f64::INFINITY, f64::min), ys.iter().cloned().fold(0.0, f64::max));
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let px = |v: f64| LEFT + xa.frac(v) * pw;
    let py = |v: f64| TOP + ph - ya.frac(v) * ph;
    let mut s = open(title);
    for k in xa.lo..=xa.hi {
        let x = LEFT + (k - xa.lo) as f64 / (xa.hi - xa.lo) as f64 * pw;
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + ph,
            TOP + ph + 16.0,
            decade_bytes(k)
        );
    }
    for k in ya.lo..=ya.hi {
        let y = TOP + ph - (k - ya.lo) as f64 / (ya.hi - ya.lo) as f64 * ph;
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            y + 4.0,
            decade_seconds(k)
        );
    }
    axes(&mut s, "message size (bytes, log)", "time per iteration (median, log)");
    for (i, (world, pts)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let path: Vec<String> = pts.iter().map(|(x, y)| format!("{:.1},{:.1}", px(*x as f64), py(*y))).collect();
        let _ = writeln!(s, r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{}"/>"#, path.join(" "));
        for (x, y) in pts {
            let _ = writeln!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"/>"#, px(*x as f64), py(*y));
        }
        let ly = TOP + 10.0 + i as f64 * 36.0;
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="2"/><text x="{:.1}" y="{:.1}">world {world}</text>"#,
            W - RIGHT + 12.0,
            W - RIGHT + 32.0,
            W - RIGHT + 38.0,
            ly + 4.0
        );
        if let Some(f) = fits.get(world) {
            let line: Vec<String> = fit_points(f, xmin, xmax).iter().map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y))).collect();
            let _ =
                writeln!(s, r#"<polyline fill="none" stroke="{c}" stroke-width="1" stroke-dasharray="5,3" points="{}"/>"#, line.join(" "));
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-dasharray="5,3"/><text x="{:.1}" y="{:.1}">fit α+n/β</text>"#,
                W - RIGHT + 12.0,
                ly + 18.0,
                W - RIGHT + 32.0,
                ly + 18.0,
                W - RIGHT + 38.0,
                ly + 22.0
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn axes(s: &mut String, xlabel: &str, ylabel: &str) {
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let _ = writeln!(s, r#"<rect x="{LEFT:.1}" y="{TOP:.1}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="black"/>"#);
    let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, LEFT + pw / 2.0, H - 18.0, esc(xlabel));
    let _ = writeln!(
        s,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        esc(ylabel)
    );
}

/// Decode step time per layout split into compute and communication, one figure per (experiment, strategy, link).
pub fn decode(rows: &[DecodeRow]) -> Vec<Figure> {
    let mut groups: BTreeMap<(String, &str, Link), Vec<&DecodeRow>> = BTreeMap::new();
    for r in rows {
        groups.entry((r.experiment.clone(), r.strategy.name(), r.link.clone())).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|((experiment, strategy, link), mut bars)| {
            bars.sort_by(|a, b| {
                let key = |r: &DecodeRow| {
                    let kind = (r.model.clone(), r.device.name(), r.dtype_name(), r.threads);
                    (r.world, r.head_name(), r.sequences, r.overlap, r.step_mode, kind, r.run.clone())
                };
                key(a).cmp(&key(b))
            });
            Figure {
                file: format!("figures/{}-{}-{}.svg", slug(&experiment), slug(strategy), slug(link.name())),
                alt: format!(
                    "decode step time per world size, compute and communication stacked ({strategy}, {link}, experiment {experiment})"
                ),
                svg: bars_svg(&format!("decode step: {strategy} on {link} ({experiment})"), &bars),
            }
        })
        .collect()
}

/// What tells a bar apart beside its layout, in the label's small words: its model where the
/// figure's bars are of several, a half precision (`bf16`, `f16`), threads per rank above one
/// (`2t`), a GPU (`cuda`).
fn kind_words(r: &DecodeRow, many_models: bool) -> String {
    let mut words = String::new();
    if many_models {
        words.push_str(&format!(" {}", r.model));
    }
    match r.dtype {
        Some(crate::spec::schema::Dtype::Bfloat16) => words.push_str(" bf16"),
        Some(crate::spec::schema::Dtype::Float16) => words.push_str(" f16"),
        _ => {}
    }
    if r.threads > 1 {
        words.push_str(&format!(" {}t", r.threads));
    }
    if r.device != crate::spec::schema::Device::Cpu {
        words.push_str(&format!(" {}", r.device.name()));
    }
    words
}

/// Points `(x, y)` per world size.
type PointsByWorld = BTreeMap<u32, Vec<(f64, f64)>>;

/// Prefill time against routing imbalance, one point per expert split and one series per
/// world size: one figure per (experiment, link) with expert runs.
pub fn expert_imbalance(rows: &[DecodeRow]) -> Vec<Figure> {
    let mut groups: BTreeMap<(String, Link), PointsByWorld> = BTreeMap::new();
    for r in rows {
        if let Some(e) = &r.experts {
            let series = groups.entry((r.experiment.clone(), r.link.clone())).or_default();
            series.entry(r.world).or_default().push((e.overall_imbalance(), r.prefill.median));
        }
    }
    groups
        .into_iter()
        .map(|((experiment, link), mut series)| {
            series.values_mut().for_each(|v| v.sort_by(|a, b| a.0.total_cmp(&b.0)));
            Figure {
                file: format!("figures/{}-imbalance-{}.svg", slug(&experiment), slug(link.name())),
                alt: format!("prefill time against routing imbalance, one series per world size ({link}, experiment {experiment})"),
                svg: scatter_svg(&format!("expert split: prefill against imbalance on {link} ({experiment})"), &series),
            }
        })
        .collect()
}

/// Points `(imbalance, seconds)` per world on linear axes from imbalance 1 and time 0.
fn scatter_svg(title: &str, series: &PointsByWorld) -> String {
    let points = || series.values().flatten();
    let xmax = points().map(|p| p.0).fold(1.0, f64::max).ceil().max(2.0);
    let top = points().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let step = nice_step(top);
    let ymax = (top / step).ceil() * step;
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let (px, py) = (|x: f64| LEFT + (x - 1.0) / (xmax - 1.0) * pw, |y: f64| TOP + ph - y / ymax * ph);
    let mut s = open(title);
    for i in 0..=(ymax / step).round() as i64 {
        let v = i as f64 * step;
        let label = if i == 0 { "0".to_string() } else { crate::units::format_seconds(v) };
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            py(v) + 4.0,
            y = py(v)
        );
    }
    // Every whole imbalance up to 10; past that about five ticks (an imbalance is at most the world).
    let xstep = if xmax <= 10.0 { 1 } else { nice_step(xmax - 1.0).round().max(1.0) as usize };
    for k in (1..=xmax as i64).step_by(xstep) {
        let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{k}</text>"#, px(k as f64), TOP + ph + 16.0);
    }
    axes(&mut s, "imbalance: busiest rank's (token, expert) pairs / mean", "prefill (median)");
    for (i, (world, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = pts.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
        let _ = writeln!(s, r#"<polyline points="{}" fill="none" stroke="{color}"/>"#, path.join(" "));
        for &(x, y) in pts {
            let _ = writeln!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{color}"/>"#, px(x), py(y));
        }
        let (lx, ly) = (W - RIGHT + 12.0, TOP + 13.0 + 20.0 * i as f64);
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{color}"/><text x="{:.1}" y="{:.1}">world {world}</text>"#,
            lx + 5.0,
            ly - 4.0,
            lx + 14.0,
            ly
        );
    }
    s.push_str("</svg>\n");
    s
}

fn nice_step(max: f64) -> f64 {
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| raw <= *s).unwrap_or(10.0 * mag)
}

fn bars_svg(title: &str, bars: &[&DecodeRow]) -> String {
    let part = |s: super::facts::Stats| s.median.max(0.0);
    let top = bars.iter().map(|b| (part(b.compute) + part(b.comm)).max(b.step.median)).fold(0.0, f64::max).max(1e-9);
    let step = nice_step(top);
    let ymax = (top / step).ceil() * step;
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let py = |v: f64| TOP + ph - v / ymax * ph;
    let mut s = open(title);
    let ticks = (ymax / step).round() as i64;
    for i in 0..=ticks {
        let v = i as f64 * step;
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            py(v),
            LEFT + pw,
            py(v),
            LEFT - 6.0,
            py(v) + 4.0,
            if i == 0 { "0".to_string() } else { crate::units::format_seconds(v) }
        );
    }
    axes(&mut s, "ranks (world size)", "decode step (median)");
    let slot = pw / bars.len().max(1) as f64;
    let width = (slot * 0.6).min(60.0);
    let many_per_world = bars.windows(2).any(|w| w[0].world == w[1].world);
    let many_models = bars.iter().any(|b| b.model != bars[0].model);
    for (i, b) in bars.iter().enumerate() {
        let x = LEFT + slot * (i as f64 + 0.5) - width / 2.0;
        let (compute, comm) = (part(b.compute), part(b.comm));
        let _ = writeln!(
            s,
            r##"<rect x="{x:.1}" y="{:.1}" width="{width:.1}" height="{:.1}" fill="#1f77b4"/>"##,
            py(compute),
            ph * compute / ymax
        );
        let _ = writeln!(
            s,
            r##"<rect x="{x:.1}" y="{:.1}" width="{width:.1}" height="{:.1}" fill="#ff7f0e"/>"##,
            py(compute + comm),
            ph * comm / ymax
        );
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black" stroke-width="2"/>"#,
            x - 4.0,
            py(b.step.median),
            x + width + 4.0,
            py(b.step.median)
        );
        let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, x + width / 2.0, TOP + ph + 16.0, b.world);
        if many_per_world || many_models || b.step_mode == crate::spec::schema::StepMode::Graph {
            // A second, smaller line keeps neighbouring labels apart: head placement, sequences,
            // the overlap pieces and a replayed graph.
            let head = if b.head == Some(HeadPlacement::Replicated) { "repl" } else { b.head_name() };
            let mut overlap = b.overlap.map_or(String::new(), |n| format!(" ov{n}"));
            if b.step_mode == crate::spec::schema::StepMode::Graph {
                overlap.push_str(" graph");
            }
            overlap.push_str(&kind_words(b, many_models));
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{} ×{}{}</text>"#,
                x + width / 2.0,
                TOP + ph + 28.0,
                esc(head),
                b.sequences,
                esc(&overlap)
            );
        }
    }
    let lx = W - RIGHT + 12.0;
    let _ = writeln!(
        s,
        r##"<rect x="{lx:.1}" y="{:.1}" width="14" height="10" fill="#1f77b4"/><text x="{:.1}" y="{:.1}">compute</text>"##,
        TOP + 4.0,
        lx + 20.0,
        TOP + 13.0
    );
    let _ = writeln!(
        s,
        r##"<rect x="{lx:.1}" y="{:.1}" width="14" height="10" fill="#ff7f0e"/><text x="{:.1}" y="{:.1}">communication</text>"##,
        TOP + 24.0,
        lx + 20.0,
        TOP + 33.0
    );
    let _ = writeln!(
        s,
        r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black" stroke-width="2"/><text x="{:.1}" y="{:.1}">step median</text>"#,
        TOP + 49.0,
        lx + 14.0,
        TOP + 49.0,
        lx + 20.0,
        TOP + 53.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_imbalance_axis_gets_a_few_ticks_and_a_narrow_one_every_whole_number() {
        let ticks = |imbalance: f64| {
            let series: PointsByWorld = [(4, vec![(1.0, 0.1), (imbalance, 0.2)])].into_iter().collect();
            let svg = scatter_svg("t", &series);
            svg.split(r#"text-anchor="middle">"#).skip(1).filter(|label| label.starts_with(|c: char| c.is_ascii_digit())).count()
        };
        assert_eq!(ticks(4.0), 4, "1, 2, 3, 4");
        assert!(ticks(65_536.0) <= 8, "{}", ticks(65_536.0));
    }

    #[test]
    fn decade_labels() {
        assert_eq!(decade_bytes(0), "1 B");
        assert_eq!(decade_bytes(4), "10 kB");
        assert_eq!(decade_seconds(-6), "1 µs");
        assert_eq!(decade_seconds(-4), "100 µs");
        assert_eq!(decade_seconds(0), "1 s");
        assert_eq!(nice_step(0.023), 0.005);
    }
}
