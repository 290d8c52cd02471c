//! A hand-written SVG line plot of throughput over time, one line per flow.

use std::fmt::Write;

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Renders `series` (one `(label, points)` per line, points as `(seconds, Mb/s)`).
pub fn throughput_plot(title: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    let (w, h, ml, mr, mt, mb) = (900.0, 480.0, 70.0, 160.0, 40.0, 50.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let xmax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.05;
    let x = |t: f64| ml + t / xmax * pw;
    let y = |v: f64| mt + ph - v / ymax * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        ml + pw / 2.0,
        escape(title)
    );
    for i in 0..=5 {
        let v = ymax * i as f64 / 5.0;
        let t = xmax * i as f64 / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{ml}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{v:.1}</text>"##,
            ml + pw,
            ml - 6.0,
            y(v) + 4.0,
            yy = y(v)
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{t:.1}</text>"#,
            x(t),
            mt + ph + 18.0
        );
    }
    let _ = writeln!(
        s,
        r#"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">virtual time (s)</text>"#,
        ml + pw / 2.0,
        h - 10.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">goodput (Mb/s)</text>"#,
        mt + ph / 2.0
    );
    for (i, (label, pts)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{}"/>"#,
            path.join(" ")
        );
        let ly = mt + 16.0 * i as f64 + 10.0;
        let _ = writeln!(
            s,
            r#"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            ml + pw + 10.0,
            ml + pw + 30.0,
            ml + pw + 36.0,
            ly + 4.0,
            escape(label)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_has_one_polyline_per_series_and_escapes_labels() {
        let s = throughput_plot(
            "a<b",
            &[
                ("f0".into(), vec![(0.0, 1.0), (1.0, 2.0)]),
                ("f1 & co".into(), vec![(0.0, 0.5)]),
            ],
        );
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("a&lt;b") && s.contains("f1 &amp; co"));
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
    }
}
