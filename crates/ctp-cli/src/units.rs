//! Parsing human-friendly values: durations (`30ms`), rates (`200mbit`),
//! probabilities (`1%` or `0.01`) and Gilbert–Elliott parameters.

use crate::relay::model::Loss;

/// `30ms`, `2s`, `500us`, `0` → microseconds.
pub fn duration_us(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e6)
    } else if s == "0" {
        ("0", 1.0)
    } else {
        return Err(format!("`{s}` needs a unit: us, ms or s (e.g. 30ms)"));
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 30ms)"))?;
    if !(0.0..=3.6e9).contains(&(v * mult)) {
        return Err(format!("`{s}` is out of range"));
    }
    Ok((v * mult).round() as u64)
}

/// `200mbit`, `1gbit`, `100kbit`, `5000bit` → bits per second.
pub fn rate_bps(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|&(suffix, m)| t.strip_suffix(suffix).map(|n| (n.to_string(), m)))
        .ok_or_else(|| format!("`{s}` needs a unit: bit, kbit, mbit or gbit (e.g. 200mbit)"))?;
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a rate (e.g. 200mbit)"))?;
    if !(v * mult >= 1000.0 && v * mult <= 1e12) {
        return Err(format!("`{s}` is out of range (1kbit to 1000gbit)"));
    }
    Ok((v * mult) as u64)
}

/// `1GiB`, `64MiB`, `512KiB`, `4MB`, `1000` → bytes.
pub fn size_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let units: [(&str, u64); 7] = [
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("kB", 1000),
        ("B", 1),
    ];
    let (num, mult) = units
        .iter()
        .find_map(|&(u, m)| t.strip_suffix(u).map(|n| (n, m)))
        .unwrap_or((t, 1));
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 1GiB, 64MiB)"))?;
    let bytes = v * mult as f64;
    if !(1.0..=1e13).contains(&bytes) {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(bytes as u64)
}

/// `1%` or `0.01` → 0.01.
pub fn probability(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(n) => n.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("`{s}` is not a probability (e.g. 1% or 0.01)"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("`{s}` is out of range: 0 to 100%"));
    }
    Ok(v)
}

/// The loss model from `--loss P` or `--ge-loss p,r,h,k` (not both).
pub fn loss(bernoulli: Option<&str>, ge: Option<&str>) -> Result<Loss, String> {
    match (bernoulli, ge) {
        (Some(_), Some(_)) => Err("use either --loss or --ge-loss, not both".into()),
        (Some(p), None) => Ok(Loss::Bernoulli(
            probability(p).map_err(|e| format!("--loss: {e}"))?,
        )),
        (None, Some(list)) => {
            let v: Vec<f64> = list
                .split(',')
                .map(probability)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("--ge-loss: {e}"))?;
            match v[..] {
                [p, r, h, k] => Ok(Loss::GilbertElliott { p, r, h, k }),
                _ => Err("--ge-loss takes four values p,r,h,k (e.g. 1%,10%,0,100%)".into()),
            }
        }
        (None, None) => Ok(Loss::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_bad_ones_say_why() {
        assert_eq!(duration_us("30ms"), Ok(30_000));
        assert_eq!(duration_us("1.5s"), Ok(1_500_000));
        assert_eq!(duration_us("250us"), Ok(250));
        assert_eq!(duration_us("0"), Ok(0));
        assert!(duration_us("30").unwrap_err().contains("unit"));
        assert_eq!(rate_bps("200mbit"), Ok(200_000_000));
        assert_eq!(rate_bps("1Gbit"), Ok(1_000_000_000));
        assert!(rate_bps("200").unwrap_err().contains("unit"));
        assert_eq!(size_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(size_bytes("4 MiB"), Ok(4 << 20));
        assert_eq!(size_bytes("1000"), Ok(1000));
        assert!(size_bytes("lots").is_err());
        assert_eq!(probability("1%"), Ok(0.01));
        assert_eq!(probability("0.05"), Ok(0.05));
        assert!(probability("150%").unwrap_err().contains("range"));
        assert!(matches!(
            loss(None, Some("1%,10%,0,100%")),
            Ok(Loss::GilbertElliott { .. })
        ));
        assert!(loss(Some("1%"), Some("1%,1%,1%,1%")).is_err());
        assert!(loss(None, Some("1%,2%")).unwrap_err().contains("four"));
    }
}
