//! `${VAR}` and `${VAR:-default}` in the raw config text, before TOML parsing. `$$` is a
//! literal `$`. A variable that is unset and has no default is an error naming it and its line.

use crate::error::ConfigError;

pub fn interpolate(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut line = 1;
    while let Some(pos) = rest.find('$') {
        let (before, after) = rest.split_at(pos);
        line += before.matches('\n').count();
        out.push_str(before);
        if let Some(stripped) = after.strip_prefix("$$") {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix("${") {
            let end = body
                .find('}')
                .ok_or(ConfigError::UnterminatedVariable { line })?;
            let expr = &body[..end];
            let (name, default) = match expr.split_once(":-") {
                Some((n, d)) => (n.trim(), Some(d)),
                None => (expr.trim(), None),
            };
            match (lookup(name), default) {
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => {
                    return Err(ConfigError::MissingVariable {
                        line,
                        var: name.to_string(),
                    });
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        (k == "HOME_DIR").then(|| "/home/x".to_string())
    }

    #[test]
    fn substitutes_defaults_and_escapes() {
        assert_eq!(
            interpolate("a = \"${HOME_DIR}/s\"", env).unwrap(),
            "a = \"/home/x/s\""
        );
        assert_eq!(
            interpolate("a = \"${NOPE:-fallback}\"", env).unwrap(),
            "a = \"fallback\""
        );
        assert_eq!(
            interpolate("a = \"$$5 and $x\"", env).unwrap(),
            "a = \"$5 and $x\""
        );
    }

    #[test]
    fn missing_variable_names_line_and_var() {
        let err = interpolate("x = 1\ny = \"${NOPE}\"", env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 2: environment variable `NOPE` is not set (write ${NOPE:-default} to give a default)"
        );
        let err = interpolate("\n\nx = \"${OPEN\"", env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 3: unterminated `${` (write $$ for a literal dollar sign)"
        );
    }
}
