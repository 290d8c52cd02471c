//! A bar chart of goodput, one group per path, written by hand (a few dozen lines of SVG need
//! no dependency). Each group has its own scale: loopback and a 100 Mbit/s path differ by
//! orders of magnitude.

use super::Section;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG bar chart of each row's goodput, a group per path scaled to its largest row;
/// rows without goodput are labelled with their status, not drawn.
pub fn bars(sections: &[Section], subtitle: &str) -> String {
    let (width, bar_h, left, gap) = (900.0, 22.0, 170.0, 6.0);
    let rows: usize = sections.iter().map(|s| s.rows.len()).sum();
    let height = 60.0 + sections.len() as f64 * 34.0 + rows as f64 * (bar_h + gap);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"13\">\n\
         <text x=\"10\" y=\"22\" font-size=\"16\">ctp bench: goodput (Mb/s)</text>\n\
         <text x=\"10\" y=\"40\" fill=\"#555\">{}</text>\n",
        escape(subtitle)
    );
    let mut y = 55.0;
    for s in sections {
        y += 22.0;
        out += &format!(
            "<text x=\"10\" y=\"{y}\" font-weight=\"bold\">{}</text> <text x=\"{left}\" y=\"{y}\" fill=\"#555\">{}</text>\n",
            escape(&s.path),
            escape(&s.description)
        );
        y += 12.0;
        let max = s
            .rows
            .iter()
            .filter_map(|r| r.goodput_mbps)
            .fold(1.0, f64::max);
        for r in &s.rows {
            out += &format!(
                "<text x=\"10\" y=\"{}\">{}</text>\n",
                y + 16.0,
                escape(&r.name)
            );
            match r.goodput_mbps {
                Some(g) => {
                    let w = (width - left - 110.0) * g / max;
                    let color = if r.name.starts_with("ctp") {
                        "#2b7bb9"
                    } else {
                        "#999"
                    };
                    let mark = if r.capped { " (capped)" } else { "" };
                    out += &format!(
                        "<rect x=\"{left}\" y=\"{y}\" width=\"{w:.1}\" height=\"{bar_h}\" fill=\"{color}\"/>\n<text x=\"{:.1}\" y=\"{}\">{g:.0}{mark}</text>\n",
                        left + w + 6.0,
                        y + 16.0
                    );
                }
                None => {
                    out += &format!(
                        "<text x=\"{left}\" y=\"{}\" fill=\"#a00\">{}</text>\n",
                        y + 16.0,
                        escape(&r.status)
                    )
                }
            }
            y += bar_h + gap;
        }
    }
    out + "</svg>\n"
}

#[cfg(test)]
mod tests {
    use super::super::{Row, Section};
    use super::*;

    #[test]
    fn bars_scale_per_path_and_label_missing_rows() {
        let row = |name: &str, g: Option<f64>, status: &str| Row {
            name: name.into(),
            status: status.into(),
            goodput_mbps: g,
            sender_cpu_s_per_gb: None,
            receiver_cpu_s_per_gb: None,
            ctp_ratio: None,
            capped: false,
            dropped_packets: None,
            retransmissions_per_gb: None,
            verified: false,
        };
        let section = |path: &str, rows| Section {
            path: path.into(),
            description: "d".into(),
            rows,
            emulator: Vec::new(),
        };
        let svg = bars(
            &[
                section(
                    "loopback",
                    vec![
                        row("ctp reliable", Some(1000.0), "ok"),
                        row("udt4", Some(500.0), "ok"),
                        row("srt", None, "missing: x"),
                    ],
                ),
                section(
                    "veth-100m",
                    vec![
                        row("ctp reliable", Some(90.0), "ok"),
                        row("udt4", Some(45.0), "ok"),
                    ],
                ),
            ],
            "t",
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // Each path is scaled to its own largest row.
        assert_eq!(svg.matches("width=\"620.0\"").count(), 2, "{svg}");
        assert_eq!(svg.matches("width=\"310.0\"").count(), 2, "{svg}");
        assert!(svg.contains("missing: x") && svg.contains("veth-100m"));
    }
}
