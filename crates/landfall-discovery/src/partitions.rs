//! Hive-style partition values in paths: `year=2024/month=01/file.json`.

/// The `key=value` directory levels of a relative path, in order, values percent-decoded.
/// `__HIVE_DEFAULT_PARTITION__` is a null value.
pub fn hive_partitions(relative: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut parts: Vec<&str> = relative.split('/').collect();
    parts.pop(); // the file name
    for dir in parts {
        if let Some((k, v)) = dir.split_once('=')
            && !k.is_empty()
        {
            let v = percent_decode(v);
            let v = (v != "__HIVE_DEFAULT_PARTITION__").then_some(v);
            out.push((k.to_string(), v));
        }
    }
    out
}

/// Decode `%XX` escapes. Works on bytes, so a `%` followed by anything but two hex digits
/// (`%é`, `%4`, a trailing `%`) is kept literally instead of panicking on a slice that ends
/// inside a multi-byte character. Escapes that decode to invalid UTF-8 become U+FFFD.
fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((hi << 4) | lo);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_key_value_levels() {
        assert_eq!(
            hive_partitions("date=2024-01-02/region=eu%2Fwest/x/f.json"),
            vec![
                ("date".into(), Some("2024-01-02".into())),
                ("region".into(), Some("eu/west".into()))
            ]
        );
        assert_eq!(
            hive_partitions("k=__HIVE_DEFAULT_PARTITION__/f.json"),
            vec![("k".into(), None)]
        );
        assert!(
            hive_partitions("a=b.json").is_empty(),
            "the file name is not a level"
        );
    }

    #[test]
    fn non_ascii_and_malformed_escapes_never_panic() {
        let one = |p: &str| hive_partitions(p).pop().and_then(|(_, v)| v);
        // A `%` right before a multi-byte character used to slice inside it and panic.
        assert_eq!(one("k=%é/f.json").as_deref(), Some("%é"));
        assert_eq!(one("k=%aé/f.json").as_deref(), Some("%aé"));
        assert_eq!(one("k=%4/f.json").as_deref(), Some("%4"));
        assert_eq!(one("k=%/f.json").as_deref(), Some("%"));
        assert_eq!(one("k=%zz%41/f.json").as_deref(), Some("%zzA"));
        assert_eq!(one("k=日本語/f.json").as_deref(), Some("日本語"));
        assert_eq!(one("k=%E6%97%A5本/f.json").as_deref(), Some("日本"));
        assert_eq!(
            one("k=%e6%97%a5/f.json").as_deref(),
            Some("日"),
            "lower-case hex"
        );
        assert_eq!(one("k=a%20b%3Ac/f.json").as_deref(), Some("a b:c"));
        // A truncated UTF-8 sequence decodes lossily rather than failing.
        assert_eq!(one("k=%E6%97/f.json").as_deref(), Some("\u{FFFD}"));
    }
}
