//! "Did you mean": an unknown key (or an unknown value of a closed choice) gets the closest
//! known one as a suggestion. serde names the
//! unknown field and the fields it expected (`unknown field `partiton_by`, expected one of
//! `path`, `store`, ...`); the suggestion is the expected field the unknown one most likely
//! misspells: the same name in snake_case (Auto Loader's camelCase options, `partitionBy`),
//! or the nearest by edit distance when it is near enough to be a typo.

/// The message with a suggestion appended, when it names an unknown field and a known one is
/// close; otherwise the message as it is.
pub fn with_suggestion(message: &str) -> String {
    // The config crate's form for a closed choice names neither the allowed values nor the
    // key in serde's words: `enum EvolutionMode does not have variant constructor x`.
    if let Some(choice) = closed_choice(message) {
        return choice;
    }
    match suggestion(message) {
        Some(Hint::Key(k)) => format!("{message} (did you mean `{k}`?)"),
        Some(Hint::Note(n)) => format!("{message} ({n})"),
        None => message.to_string(),
    }
}

/// `message` about a value no variant of a closed choice has, with the allowed values and
/// the closest of them.
fn closed_choice(message: &str) -> Option<String> {
    let rest = &message[message.find("enum ")? + "enum ".len()..];
    let (name, rest) = rest.split_once(" does not have variant constructor ")?;
    let value = rest.split(" for key `").next().unwrap_or(rest);
    let allowed = variants(name)?;
    let known: Vec<&str> = allowed.iter().map(String::as_str).collect();
    let close = closest(value, &known)
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default();
    Some(format!("{message} (one of: {}{close})", known.join(", ")))
}

/// The names serde lists as expected (`expected one of `a`, `b``), up to the key path the
/// config crate adds at the end; none when the message lists none.
fn expected_names(message: &str) -> Vec<&str> {
    let Some(at) = message.find("expected") else {
        return Vec::new();
    };
    let expected = &message[at..];
    let expected = expected.split(" for key `").next().unwrap_or(expected);
    expected.split('`').skip(1).step_by(2).collect()
}

/// The values a closed choice of the configuration takes, asked of its own deserializer (so
/// the list never drifts from the type).
fn variants(name: &str) -> Option<Vec<String>> {
    fn of<T: serde::de::DeserializeOwned>() -> Vec<String> {
        let Err(e) = serde_json::from_str::<T>("\"\"") else {
            return Vec::new();
        };
        expected_names(&e.to_string())
            .into_iter()
            .map(str::to_string)
            .collect()
    }
    let v = match name {
        "EvolutionMode" => of::<crate::EvolutionMode>(),
        "SinkFormat" => of::<crate::SinkFormat>(),
        "LogFormat" => of::<crate::LogFormat>(),
        "DiscoveryMode" => of::<crate::DiscoveryMode>(),
        _ => return None,
    };
    (!v.is_empty()).then_some(v)
}

/// What follows an unknown key's error.
enum Hint {
    /// The key it most likely misspells.
    Key(String),
    /// How to write what it meant.
    Note(&'static str),
}

fn suggestion(message: &str) -> Option<Hint> {
    let field = backticked_after(message, "unknown field `");
    // A value of a closed choice (`schema_evolution_mode = "add_new_column"`) likewise.
    let unknown = field.or_else(|| backticked_after(message, "unknown variant `"))?;
    // `cloudFiles.maxFilesPerTrigger = 3` is a table `cloudFiles` in TOML.
    if field == Some("cloudFiles") {
        return Some(Hint::Note(
            "Auto Loader's cloudFiles.* options are written here without the prefix, in snake_case: cloudFiles.maxFilesPerTrigger is max_files_per_trigger",
        ));
    }
    let known = expected_names(message);
    closest(unknown, &known).map(|k| Hint::Key(k.to_string()))
}

/// The known name `unknown` most likely stands for: the same name in snake_case (Auto
/// Loader's camelCase spellings), or a typo of one word of it (same words otherwise). A
/// different word is not a typo: `max_rows_per_trigger` is not `max_files_per_trigger`.
fn closest<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let snake = snake_case(unknown);
    if let Some(k) = known.iter().find(|k| **k == snake) {
        return Some(k);
    }
    let words: Vec<&str> = snake.split('_').collect();
    let mut found = known.iter().filter(|k| {
        let theirs: Vec<&str> = k.split('_').collect();
        if theirs.len() != words.len() {
            return false;
        }
        let differing: Vec<(&str, &str)> = words
            .iter()
            .zip(&theirs)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (*a, *b))
            .collect();
        matches!(differing.as_slice(), [(a, b)] if typo(a, b))
    });
    let first = found.next()?;
    // Two known keys as near: no guess.
    found.next().is_none().then_some(*first)
}

/// `a` is a typo of the word `b`: two neighbours swapped, or (for words of 4 letters or more)
/// at most a third of the letters edited, at least one.
fn typo(a: &str, b: &str) -> bool {
    let d = edit_distance(a, b);
    let swapped = d == 1 && {
        let (mut x, mut y): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        x.sort_unstable();
        y.sort_unstable();
        x == y
    };
    swapped || (b.chars().count() >= 4 && d >= 1 && d <= (b.chars().count() / 3).max(1))
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
/// that key from `tree` so the rest can be read; the path of the table it was in (empty for
/// the root) when it was found and removed.
pub fn remove_unknown_key(tree: &mut config::Value, message: &str) -> Option<String> {
    let field = backticked_after(message, "unknown field `")?;
    let parent = backticked_after(message, " for key `").unwrap_or_default();
    match &mut table_at(tree, parent)?.kind {
        config::ValueKind::Table(map) => map.shift_remove(field).map(|_| parent.to_string()),
        _ => None,
    }
}

/// If `message` is a missing field of a table an unknown key was removed from (`trimmed`),
/// that table's path: the unknown key was the missing one, misspelt.
pub fn removed_key_was_required(message: &str, trimmed: &[String]) -> Option<String> {
    // The config crate's form: `missing configuration field "streams.a.source"`.
    let prefix = "missing configuration field \"";
    let rest = &message[message.find(prefix)? + prefix.len()..];
    let path = &rest[..rest.find('"')?];
    let table = path.rsplit_once('.').map_or("", |(t, _)| t);
    trimmed
        .iter()
        .any(|t| t == table && !t.is_empty())
        .then(|| table.to_string())
}

/// Remove the table at `path` (not the root) from `tree`; whether it was there.
pub fn remove_table(tree: &mut config::Value, path: &str) -> bool {
    let (parent, name) = path.rsplit_once('.').unwrap_or(("", path));
    match table_at(tree, parent).map(|v| &mut v.kind) {
        Some(config::ValueKind::Table(map)) => map.shift_remove(name).is_some(),
        _ => false,
    }
}

/// The value at a dotted `path` (the root for an empty one). A key holding a dot (a stream
/// named `events.v2`) is not found: the caller stops setting keys aside there.
fn table_at<'a>(tree: &'a mut config::Value, path: &str) -> Option<&'a mut config::Value> {
    let mut node = tree;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let config::ValueKind::Table(map) = &mut node.kind else {
            return None;
        };
        node = map.get_mut(segment)?;
    }
    Some(node)
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
    fn another_word_is_not_a_typo() {
        let stream = "unknown field `{}`, expected one of `max_files_per_trigger`, `max_file_age`, `schema_sample_files`, `schema_sample_bytes`, `ignore_corrupt_files`, `notifications`, `discovery` for key `streams.a`";
        for other in [
            "max_rows_per_trigger",
            "max_file_size",
            "schema_sample_size",
            "ignore_corrupt_records",
            "use_notifications",
            "useNotifications",
        ] {
            let m = with_suggestion(&stream.replace("{}", other));
            assert!(!m.contains("did you mean"), "{m}");
        }
        let queue = "unknown field `{}`, expected one of `sns`, `queue_url` for key `streams.a.notifications`";
        assert!(!with_suggestion(&queue.replace("{}", "sqs")).contains("did you mean"));
        assert!(!with_suggestion(&queue.replace("{}", "queue_arn")).contains("did you mean"));
        assert!(with_suggestion(&queue.replace("{}", "nss")).ends_with("(did you mean `sns`?)"));
        let cloud = with_suggestion(&stream.replace("{}", "cloudFiles"));
        assert!(
            cloud.ends_with("cloudFiles.maxFilesPerTrigger is max_files_per_trigger)"),
            "{cloud}"
        );
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
