//! Spark datetime patterns (`yyyy-MM-dd HH:mm:ss`) as chrono formats, for `timestamp_format`
//! and `date_format`: validated with the configuration, used by the decoders.

/// A Spark datetime pattern as a chrono format, or why it cannot be.
pub fn chrono_format(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '\'' {
                j += 1;
            }
            if j == chars.len() {
                return Err(format!("{pattern:?}: an unclosed quote"));
            }
            if j == i + 1 {
                out.push('\'');
            } else {
                for ch in &chars[i + 1..j] {
                    if *ch == '%' {
                        out.push_str("%%");
                    } else {
                        out.push(*ch);
                    }
                }
            }
            i = j + 1;
            continue;
        }
        let mut n = 1;
        while i + n < chars.len() && chars[i + n] == c {
            n += 1;
        }
        let piece = match (c, n) {
            ('y', 2) => "%y".to_string(),
            ('y', _) => "%Y".to_string(),
            ('M', 1) => "%-m".to_string(),
            ('M', 2) => "%m".to_string(),
            ('M', 3) => "%b".to_string(),
            ('M', _) => "%B".to_string(),
            ('d', 1) => "%-d".to_string(),
            ('d', _) => "%d".to_string(),
            ('H', 1) => "%-H".to_string(),
            ('H', _) => "%H".to_string(),
            ('h', 1) => "%-I".to_string(),
            ('h', _) => "%I".to_string(),
            ('m', _) => "%M".to_string(),
            ('s', _) => "%S".to_string(),
            ('S', k) if k <= 9 => format!("%{k}f"),
            ('a', _) => "%p".to_string(),
            ('X' | 'x', 3) | ('Z', 5) => "%:z".to_string(),
            ('X' | 'x' | 'Z', _) => "%z".to_string(),
            ('%', _) => "%%".repeat(n),
            (c, _) if c.is_ascii_alphabetic() => {
                return Err(format!("{pattern:?}: the letter `{c}` is not supported"));
            }
            (c, _) => c.to_string().repeat(n),
        };
        out.push_str(&piece);
        i += n;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_translate() {
        assert_eq!(
            chrono_format("yyyy-MM-dd HH:mm:ss").unwrap(),
            "%Y-%m-%d %H:%M:%S"
        );
        assert_eq!(
            chrono_format("dd/MM/yyyy'T'HH:mm:ss.SSSXXX").unwrap(),
            "%d/%m/%YT%H:%M:%S.%3f%:z"
        );
        assert_eq!(
            chrono_format("yy 'at' HH '' 100%").unwrap(),
            "%y at %H ' 100%%"
        );
        assert!(chrono_format("yyyy-QQ").is_err());
        assert!(chrono_format("'open").is_err());
    }
}
