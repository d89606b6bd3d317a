//! Reading the fields and encodings of queue messages: values at a dotted path of a JSON
//! object, strict percent-decoding, and base64 (Pub/Sub bodies, SQS messages sent encoded).
//! notification.rs parses the message shapes on top of these.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

pub(crate) fn lookup<'a>(obj: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut value = obj.get(parts.next()?)?;
    for part in parts {
        value = value.get(part)?;
    }
    Some(value)
}

pub(crate) fn opt_str(obj: &Map<String, Value>, path: &str) -> Option<String> {
    lookup(obj, path)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A size as a JSON number or a decimal string (GCS sends strings).
pub(crate) fn opt_u64(obj: &Map<String, Value>, path: &str) -> Option<u64> {
    match lookup(obj, path)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

pub(crate) fn opt_time(obj: &Map<String, Value>, path: &str) -> Option<DateTime<Utc>> {
    let text = lookup(obj, path)?.as_str()?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `%XX` escapes decoded; a `%` without two hex digits after it, or a result that is not UTF-8,
/// is an error.
pub(crate) fn percent_decode_strict(s: &str) -> Result<String, &'static str> {
    let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            match (hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
                (Some(hi), Some(lo)) => out.push((hi * 16 + lo) as u8),
                _ => return Err("'%' not followed by two hex digits"),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent escapes do not decode to UTF-8")
}

pub(crate) fn looks_like_base64(body: &str) -> bool {
    let body = body.trim();
    !body.is_empty() && body.bytes().all(|b| base64_value(b).is_some() || b == b'=')
}

pub(crate) fn base64_value(b: u8) -> Option<u32> {
    match b {
        b'A'..=b'Z' => Some((b - b'A') as u32),
        b'a'..=b'z' => Some((b - b'a') as u32 + 26),
        b'0'..=b'9' => Some((b - b'0') as u32 + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// Standard or URL-safe base64, padded or not; ASCII whitespace is skipped.
pub(crate) fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits, mut digits, mut padding) = (0u32, 0u32, 0usize, 0usize);
    for (pos, b) in text.bytes().enumerate() {
        if b.is_ascii_whitespace() {
            continue;
        }
        if b == b'=' {
            padding += 1;
            if padding > 2 {
                return Err(format!("too much padding at byte {pos}"));
            }
            continue;
        }
        let Some(v) = base64_value(b) else {
            return Err(format!("invalid character at byte {pos}"));
        };
        if padding > 0 {
            return Err(format!("data after padding at byte {pos}"));
        }
        acc = (acc << 6) | v;
        bits += 6;
        digits += 1;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if digits % 4 == 1 {
        return Err(format!("truncated: {digits} base64 digits"));
    }
    if padding > 0 && (digits + padding) % 4 != 0 {
        return Err("wrong padding".to_string());
    }
    Ok(out)
}
