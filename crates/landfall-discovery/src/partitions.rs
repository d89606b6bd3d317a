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

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
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
}
