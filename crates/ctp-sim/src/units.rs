//! Human-readable quantities in scenario files: durations ("104ms", "40us", "1.5s") and
//! bandwidths ("1Gbps", "20Mbps", "500kbps", "9600bps").

use core::time::Duration;
use serde::{de, Deserialize, Deserializer};

/// A duration written with a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

/// A bandwidth in bits per second written with a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bandwidth(pub u64);

fn split_unit(s: &str) -> (&str, &str) {
    let i = s
        .find(|c: char| c.is_ascii_alphabetic() || c == 'µ')
        .unwrap_or(s.len());
    (s[..i].trim(), s[i..].trim())
}

fn number(n: &str, whole: &str) -> Result<f64, String> {
    let v: f64 = n
        .parse()
        .map_err(|_| format!("`{whole}` does not start with a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{whole}` must not be negative"));
    }
    Ok(v)
}

/// Parses "104ms", "40us", "1.5s", "2min".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (n, u) = split_unit(s);
    let v = number(n, s)?;
    let us = match u {
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "min" => 60e6,
        _ => return Err(format!("`{s}`: unit must be one of us, ms, s, min")),
    };
    let total = v * us;
    if total > 1e15 {
        return Err(format!("`{s}` is too long"));
    }
    Ok(Duration::from_micros(total.round() as u64))
}

/// Parses "1Gbps", "20Mbps", "500kbps", "9600bps".
pub fn parse_bandwidth(s: &str) -> Result<u64, String> {
    let (n, u) = split_unit(s);
    let v = number(n, s)?;
    let m = match u {
        "bps" => 1.0,
        "kbps" | "Kbps" => 1e3,
        "Mbps" => 1e6,
        "Gbps" => 1e9,
        _ => return Err(format!("`{s}`: unit must be one of bps, kbps, Mbps, Gbps")),
    };
    let bps = v * m;
    if !(1.0..=1e13).contains(&bps) {
        return Err(format!("`{s}` is outside 1 bps ..= 10 Tbps"));
    }
    Ok(bps.round() as u64)
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map(Dur).map_err(de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Bandwidth {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_bandwidth(&s)
            .map(Bandwidth)
            .map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_nonsense() {
        assert_eq!(parse_duration("104ms"), Ok(Duration::from_millis(104)));
        assert_eq!(parse_duration("40us"), Ok(Duration::from_micros(40)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(parse_bandwidth("1Gbps"), Ok(1_000_000_000));
        assert_eq!(parse_bandwidth("20Mbps"), Ok(20_000_000));
        assert!(parse_bandwidth("-1Gbps").is_err());
        assert!(parse_bandwidth("0bps").is_err());
    }
}
