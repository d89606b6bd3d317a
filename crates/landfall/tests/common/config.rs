//! Configurations for the binary, built typed instead of with `format!`: every value is
//! rendered as TOML (a string is a TOML basic string, escaped, so a path with a quote, a
//! backslash, a space or an accent stays one value), each stream a table of keys.
//!
//! ```ignore
//! let cfg = Config::in_dir(root)
//!     .stream(Stream::local("s", &root.join("in"), "json", &root.join("table")).set("max_files_per_trigger", 2))
//!     .write();
//! ```

use std::path::{Path, PathBuf};

/// A TOML value.
#[derive(Debug, Clone, PartialEq)]
pub enum V {
    Str(String),
    Bool(bool),
    Int(i64),
    Array(Vec<V>),
}

impl V {
    fn render(&self) -> String {
        match self {
            V::Str(s) => basic_string(s),
            V::Bool(b) => b.to_string(),
            V::Int(i) => i.to_string(),
            V::Array(items) => format!(
                "[{}]",
                items.iter().map(V::render).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// `s` as a TOML basic string: `"` and `\\` escaped, and every control character (U+0000 to
/// U+001F and U+007F, which TOML requires escaped) as `\uXXXX`.
fn basic_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c < ' ' || c == '\u{7f}' => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl From<&str> for V {
    fn from(s: &str) -> Self {
        V::Str(s.to_string())
    }
}

impl From<String> for V {
    fn from(s: String) -> Self {
        V::Str(s)
    }
}

impl From<&Path> for V {
    fn from(p: &Path) -> Self {
        V::Str(p.display().to_string())
    }
}

impl From<&PathBuf> for V {
    fn from(p: &PathBuf) -> Self {
        V::from(p.as_path())
    }
}

impl From<bool> for V {
    fn from(b: bool) -> Self {
        V::Bool(b)
    }
}

impl From<i64> for V {
    fn from(i: i64) -> Self {
        V::Int(i)
    }
}

impl From<u64> for V {
    fn from(i: u64) -> Self {
        V::Int(i as i64)
    }
}

impl From<usize> for V {
    fn from(i: usize) -> Self {
        V::Int(i as i64)
    }
}

impl From<i32> for V {
    fn from(i: i32) -> Self {
        V::Int(i as i64)
    }
}

impl From<&[&str]> for V {
    fn from(items: &[&str]) -> Self {
        V::Array(items.iter().map(|s| V::from(*s)).collect())
    }
}

impl<const N: usize> From<[&str; N]> for V {
    fn from(items: [&str; N]) -> Self {
        V::from(&items[..])
    }
}

/// One TOML table: its keys in order (dotted keys such as `sink.path` allowed).
#[derive(Debug, Clone, Default)]
pub struct Table {
    keys: Vec<(String, V)>,
}

impl Table {
    /// Set `key` (replacing an earlier value of it).
    pub fn set(&mut self, key: &str, v: impl Into<V>) {
        let v = v.into();
        match self.keys.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) => *old = v,
            None => self.keys.push((key.to_string(), v)),
        }
    }

    fn render(&self, header: &str) -> String {
        let mut out = format!("[{header}]\n");
        for (k, v) in &self.keys {
            out.push_str(&format!("{k} = {}\n", v.render()));
        }
        out
    }
}

/// A `[streams.<name>]` table.
#[derive(Debug, Clone)]
pub struct Stream {
    name: String,
    table: Table,
}

impl Stream {
    pub fn new(name: &str) -> Self {
        Stream {
            name: name.to_string(),
            table: Table::default(),
        }
    }

    /// A stream from a local directory (or any source URL) into a table at `sink`.
    pub fn local(name: &str, source: impl Into<V>, format: &str, sink: impl Into<V>) -> Self {
        Stream::new(name)
            .set("source", source)
            .set("format", format)
            .set("sink.path", sink)
    }

    /// A JSON stream of [`super::row`]'s lines (schema [`super::ROW_SCHEMA`]) from a local
    /// directory into a table at `sink`.
    pub fn rows(name: &str, source: impl Into<V>, sink: impl Into<V>) -> Self {
        Stream::local(name, source, "json", sink).set("schema", super::ROW_SCHEMA)
    }

    /// Set an option (`key` as the configuration writes it: `csv.header`,
    /// `sink.partition_by`, `trigger.available_now`).
    pub fn set(mut self, key: &str, v: impl Into<V>) -> Self {
        self.table.set(key, v);
        self
    }
}

/// A whole configuration file.
#[derive(Debug, Clone)]
pub struct Config {
    root: PathBuf,
    server: Table,
    sections: Vec<(String, Table)>,
    streams: Vec<Stream>,
}

impl Config {
    /// A configuration kept in `root` (`root/landfall.toml`) whose streams keep their state
    /// under `root/state`.
    pub fn in_dir(root: &Path) -> Self {
        let mut server = Table::default();
        server.set("state_dir", root.join("state").as_path());
        Config {
            root: root.to_path_buf(),
            server,
            sections: Vec::new(),
            streams: Vec::new(),
        }
    }

    /// Set a `[server]` key.
    pub fn server(mut self, key: &str, v: impl Into<V>) -> Self {
        self.server.set(key, v);
        self
    }

    /// Another table (`stores.<name>`, `locations.<name>`, `monitoring`) with its keys.
    pub fn section(mut self, header: &str, keys: &[(&str, V)]) -> Self {
        let mut t = Table::default();
        for (k, v) in keys {
            t.set(k, v.clone());
        }
        self.sections.push((header.to_string(), t));
        self
    }

    pub fn stream(mut self, s: Stream) -> Self {
        self.streams.retain(|o| o.name != s.name);
        self.streams.push(s);
        self
    }

    /// The file's text.
    pub fn toml(&self) -> String {
        let mut out = self.server.render("server");
        for (header, t) in &self.sections {
            out.push('\n');
            out.push_str(&t.render(header));
        }
        for s in &self.streams {
            out.push('\n');
            // A stream name is a bare key when it can be one, else a quoted key.
            let bare = !s.name.is_empty()
                && s.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            let key = if bare {
                s.name.clone()
            } else {
                V::from(s.name.as_str()).render()
            };
            out.push_str(&s.table.render(&format!("streams.{key}")));
        }
        out
    }

    /// Write `root/landfall.toml` (creating `root`, replacing the file) and return its path.
    pub fn write(&self) -> PathBuf {
        std::fs::create_dir_all(&self.root).unwrap();
        let p = self.root.join("landfall.toml");
        std::fs::write(&p, self.toml()).unwrap();
        p
    }
}
