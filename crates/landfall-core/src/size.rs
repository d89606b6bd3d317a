//! Human byte sizes as users write them in TOML (`10g`, `512mb`, `1.5GiB`, `4096`), and as
//! landfall shows them (`1.5 KiB`).

/// Bytes in binary units with one decimal: `512 B`, `1.5 KiB`, `3.0 GiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Parse a byte size. Suffixes are case-insensitive and binary (k = 1024), as in Auto Loader's
/// `maxBytesPerTrigger`.
pub fn parse_bytes(input: &str) -> Result<u64, String> {
    let s = input.trim().to_ascii_lowercase();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let unit = unit.trim();
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{input}` is not a byte size (expected e.g. 512m, 10g, 1048576)"))?;
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "`{input}` has an unknown unit `{unit}` (use b, k, m, g or t)"
            ));
        }
    };
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(format!("`{input}` must be at least one byte"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_bytes("10g").unwrap(), 10 << 30);
        assert_eq!(parse_bytes("512MB").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1.5k").unwrap(), 1536);
        assert!(parse_bytes("ten").unwrap_err().contains("not a byte size"));
        assert!(parse_bytes("3x").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("0").unwrap_err().contains("at least one byte"));
    }
}
