//! "Did you mean": an unknown key gets the closest known one as a suggestion. serde names the
//! unknown field and the fields it expected (`unknown field `partiton_by`, expected one of
//! `path`, `store`, ...`); the suggestion is the expected field the unknown one most likely
//! misspells: the same name in snake_case (Auto Loader's camelCase options, `partitionBy`),
//! or the nearest by edit distance when it is near enough to be a typo.

/// The message with a suggestion appended, when it names an unknown field and a known one is
/// close; otherwise the message as it is.
pub fn with_suggestion(message: &str) -> String {
    match suggestion(message) {
        Some(s) => format!("{message} (did you mean `{s}`?)"),
        None => message.to_string(),
    }
}

fn suggestion(message: &str) -> Option<String> {
    let rest = &message[message.find("unknown field `")? + "unknown field `".len()..];
    let end = rest.find('`')?;
    let unknown = &rest[..end];
    let expected_at = rest.find("expected")?;
    let expected: Vec<&str> = rest[expected_at..].split('`').skip(1).step_by(2).collect();
    closest(unknown, &expected).map(str::to_string)
}

/// The known name `unknown` most likely stands for.
fn closest<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    // Auto Loader's spellings: `cloudFiles.maxFilesPerTrigger` reads as a table `cloudFiles`;
    // `maxFilesPerTrigger` is `max_files_per_trigger`.
    let snake = snake_case(unknown.trim_start_matches("cloudFiles."));
    if let Some(k) = known.iter().find(|k| **k == snake) {
        return Some(k);
    }
    let (best, distance) = known
        .iter()
        .map(|k| (*k, edit_distance(&snake, k)))
        .min_by_key(|(_, d)| *d)?;
    // A typo, not another word: at most a third of the name (and at least 1) differs.
    (distance > 0 && distance <= (best.len() / 3).max(1)).then_some(best)
}

/// `maxFilesPerTrigger` -> `max_files_per_trigger`; `schema-hints` -> `schema_hints`.
fn snake_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for (i, c) in s.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c == '-' {
            out.push('_');
        } else {
            out.push(c);
        }
    }
    out
}

/// Levenshtein distance, counting a swap of two neighbours as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// If `message` names an unknown field (`unknown field `x`, ... for key `streams.a``), remove
/// that key from `tree` so the rest can be read; whether it was found and removed.
pub fn remove_unknown_key(tree: &mut config::Value, message: &str) -> bool {
    let Some(field) = backticked_after(message, "unknown field `") else {
        return false;
    };
    let parent = backticked_after(message, " for key `").unwrap_or_default();
    let mut node = tree;
    for segment in parent.split('.').filter(|s| !s.is_empty()) {
        let config::ValueKind::Table(map) = &mut node.kind else {
            return false;
        };
        let Some(child) = map.get_mut(segment) else {
            return false;
        };
        node = child;
    }
    match &mut node.kind {
        config::ValueKind::Table(map) => map.remove(field).is_some(),
        _ => false,
    }
}

/// The text between `prefix` (ending in a backtick) and the next backtick.
fn backticked_after<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = &message[message.find(prefix)? + prefix.len()..];
    Some(&rest[..rest.find('`')?])
}

#[cfg(test)]
mod tests {
    use super::*;

    const SINK: &str = "unknown field `{}`, expected one of `path`, `store`, `format`, `partition_by`, `target_file_size`";

    fn on(unknown: &str) -> String {
        with_suggestion(&SINK.replace("{}", unknown))
    }

    #[test]
    fn typos_and_camel_case_get_the_known_key() {
        assert!(on("partiton_by").ends_with("(did you mean `partition_by`?)"));
        assert!(on("partitionBy").ends_with("(did you mean `partition_by`?)"));
        assert!(on("targetFileSize").ends_with("(did you mean `target_file_size`?)"));
        assert!(
            on("fromat").ends_with("(did you mean `format`?)"),
            "a swap is one edit"
        );
        assert!(on("stor").ends_with("(did you mean `store`?)"));
    }

    #[test]
    fn other_words_and_other_messages_get_none() {
        assert!(!on("compression").contains("did you mean"));
        assert!(!on("x").contains("did you mean"));
        let other = "invalid type: string \"a\", expected u32";
        assert_eq!(with_suggestion(other), other);
        let two = "unknown field `avaliable_now`, expected `processing_time` or `available_now`";
        assert!(with_suggestion(two).ends_with("(did you mean `available_now`?)"));
    }
}
