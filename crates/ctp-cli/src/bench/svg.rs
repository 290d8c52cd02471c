//! A bar chart of goodput, written by hand (a few dozen lines of SVG need no dependency).

use super::Row;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG bar chart of each row's goodput; missing rows are labelled, not drawn.
pub fn bars(rows: &[Row], subtitle: &str) -> String {
    let max = rows
        .iter()
        .filter_map(|r| r.goodput_mbps)
        .fold(1.0, f64::max);
    let (width, bar_h, left) = (760.0, 26.0, 170.0);
    let height = 60.0 + rows.len() as f64 * (bar_h + 10.0);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"13\">\n\
         <text x=\"10\" y=\"22\" font-size=\"16\">ctp bench: goodput (Mb/s)</text>\n\
         <text x=\"10\" y=\"40\" fill=\"#555\">{}</text>\n",
        escape(subtitle)
    );
    for (i, r) in rows.iter().enumerate() {
        let y = 55.0 + i as f64 * (bar_h + 10.0);
        out += &format!(
            "<text x=\"10\" y=\"{}\">{}</text>\n",
            y + 18.0,
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
                out += &format!(
                    "<rect x=\"{left}\" y=\"{y}\" width=\"{w:.1}\" height=\"{bar_h}\" fill=\"{color}\"/>\n<text x=\"{}\" y=\"{}\">{g:.0}</text>\n",
                    left + w + 6.0,
                    y + 18.0
                );
            }
            None => {
                out += &format!(
                    "<text x=\"{left}\" y=\"{}\" fill=\"#a00\">{}</text>\n",
                    y + 18.0,
                    escape(&r.status)
                )
            }
        }
    }
    out + "</svg>\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_largest_and_label_missing_rows() {
        let row = |name: &str, g: Option<f64>, status: &str| Row {
            name: name.into(),
            status: status.into(),
            goodput_mbps: g,
            sender_cpu_s_per_gb: None,
            receiver_cpu_s_per_gb: None,
            ctp_ratio: None,
        };
        let svg = bars(
            &[
                row("ctp reliable", Some(1000.0), "ok"),
                row("udt4", Some(500.0), "ok"),
                row("srt", None, "missing: x"),
            ],
            "t",
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(
            svg.contains("width=\"480.0\"") && svg.contains("width=\"240.0\""),
            "{svg}"
        );
        assert!(svg.contains("missing: x"));
    }
}
