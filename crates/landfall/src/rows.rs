//! Rows printed as an aligned table, a JSON array or CSV, one row at a time.
//!
//! A cell is a JSON value, so `--format json` keeps its type: numbers are numbers, booleans
//! booleans, an absent value `null`, a set of counts an object. Tables and CSV show the same
//! cell as text (`null` as nothing, an object as `KEY=value` pairs).
//!
//! Rows are written as they come, so a command can print a ledger of millions of files in
//! constant memory: the JSON array is written element by element, one object per line. A table
//! sets its column widths from the first [`TABLE_SAMPLE`] rows; a longer value further down
//! widens only its own line.

use crate::out::OutputFormat;
use serde_json::Value;
use std::borrow::Cow;
use std::io::{self, Write};

/// Rows a table holds back to size its columns.
const TABLE_SAMPLE: usize = 1_000;

pub struct RowWriter<W: Write> {
    out: W,
    header: &'static [&'static str],
    format: OutputFormat,
    /// Table rows held back until the widths are known.
    sample: Vec<Vec<Value>>,
    /// Table column widths, once set.
    widths: Option<Vec<usize>>,
    rows: u64,
}

impl<W: Write> RowWriter<W> {
    pub fn new(out: W, header: &'static [&'static str], format: OutputFormat) -> io::Result<Self> {
        let mut w = RowWriter {
            out,
            header,
            format,
            sample: Vec::new(),
            widths: None,
            rows: 0,
        };
        if format == OutputFormat::Csv {
            let line: Vec<Cow<str>> = header.iter().map(|h| csv_field(h)).collect();
            writeln!(w.out, "{}", line.join(","))?;
        }
        Ok(w)
    }

    /// One row, a cell per header column.
    pub fn row(&mut self, cells: Vec<Value>) -> io::Result<()> {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows += 1;
        match self.format {
            OutputFormat::Table => {
                if self.widths.is_some() {
                    return self.table_line(&cells);
                }
                self.sample.push(cells);
                if self.sample.len() >= TABLE_SAMPLE {
                    self.flush_sample()?;
                }
                Ok(())
            }
            OutputFormat::Json => {
                self.out
                    .write_all(if self.rows == 1 { b"[\n  " } else { b",\n  " })?;
                self.out.write_all(b"{")?;
                for (i, (h, v)) in self.header.iter().zip(&cells).enumerate() {
                    if i > 0 {
                        self.out.write_all(b", ")?;
                    }
                    serde_json::to_writer(&mut self.out, h)?;
                    self.out.write_all(b": ")?;
                    serde_json::to_writer(&mut self.out, v)?;
                }
                self.out.write_all(b"}")
            }
            OutputFormat::Csv => {
                let line: Vec<Cow<str>> = cells
                    .iter()
                    .map(|c| match text(c) {
                        Cow::Borrowed(s) => csv_field(s),
                        Cow::Owned(s) => Cow::Owned(csv_field(&s).into_owned()),
                    })
                    .collect();
                writeln!(self.out, "{}", line.join(","))
            }
        }
    }

    /// Close the output (the table's held-back rows, the JSON array's end) and flush it.
    pub fn finish(mut self) -> io::Result<W> {
        match self.format {
            OutputFormat::Table => self.flush_sample()?,
            OutputFormat::Json if self.rows == 0 => self.out.write_all(b"[]\n")?,
            OutputFormat::Json => self.out.write_all(b"\n]\n")?,
            OutputFormat::Csv => {}
        }
        self.out.flush()?;
        Ok(self.out)
    }

    /// Flush what was written so far without closing the output (before an error message:
    /// a JSON array left open tells a reader the output is incomplete).
    pub fn abandon(mut self) -> io::Result<()> {
        if self.format == OutputFormat::Table {
            self.flush_sample()?;
        }
        if self.format == OutputFormat::Json && self.rows > 0 {
            self.out.write_all(b"\n")?;
        }
        self.out.flush()
    }

    /// Size the columns from the held-back rows, print the header and them.
    fn flush_sample(&mut self) -> io::Result<()> {
        if self.widths.is_some() {
            return Ok(());
        }
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.sample {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(text(c).chars().count());
            }
        }
        self.widths = Some(widths);
        let header: Vec<Value> = self.header.iter().map(|h| Value::from(*h)).collect();
        self.table_line(&header)?;
        for r in std::mem::take(&mut self.sample) {
            self.table_line(&r)?;
        }
        Ok(())
    }

    fn table_line(&mut self, cells: &[Value]) -> io::Result<()> {
        let widths = self.widths.as_deref().unwrap_or_default();
        let mut line = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let t = text(c);
            line.push_str(&t);
            let w = widths.get(i).copied().unwrap_or(0);
            line.extend(std::iter::repeat_n(
                ' ',
                w.saturating_sub(t.chars().count()),
            ));
        }
        writeln!(self.out, "{}", line.trim_end())
    }
}

/// A cell as tables and CSV show it.
pub fn text(v: &Value) -> Cow<'_, str> {
    match v {
        Value::Null => Cow::Borrowed(""),
        Value::String(s) => Cow::Borrowed(s),
        Value::Bool(b) => Cow::Borrowed(if *b { "true" } else { "false" }),
        Value::Number(n) => Cow::Owned(n.to_string()),
        Value::Array(a) => Cow::Owned(a.iter().map(text).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => Cow::Owned(
            o.iter()
                .map(|(k, v)| format!("{k}={}", text(v)))
                .collect::<Vec<_>>()
                .join(" "),
        ),
    }
}

fn csv_field(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HEADER: &[&str] = &["path", "size", "batch_id", "requests"];

    fn rows() -> Vec<Vec<Value>> {
        vec![
            vec![
                json!("a,b"),
                json!(10),
                Value::Null,
                json!({"GET": 2, "LIST": 1}),
            ],
            vec![
                json!("c"),
                json!(2_000_000_000_000u64),
                json!(0),
                Value::Null,
            ],
        ]
    }

    fn print(format: OutputFormat, rows: Vec<Vec<Value>>) -> String {
        let mut w = RowWriter::new(Vec::new(), HEADER, format).unwrap();
        for r in rows {
            w.row(r).unwrap();
        }
        String::from_utf8(w.finish().unwrap()).unwrap()
    }

    #[test]
    fn json_keeps_types_and_header_order() {
        let out = print(OutputFormat::Json, rows());
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v,
            json!([
                {"path": "a,b", "size": 10, "batch_id": null, "requests": {"GET": 2, "LIST": 1}},
                {"path": "c", "size": 2_000_000_000_000u64, "batch_id": 0, "requests": null},
            ])
        );
        assert!(out.find("\"path\"").unwrap() < out.find("\"size\"").unwrap());
        assert_eq!(out.lines().count(), 4, "one object per line:\n{out}");
        assert_eq!(print(OutputFormat::Json, vec![]), "[]\n");
    }

    #[test]
    fn tables_and_csv_show_text() {
        assert_eq!(
            print(OutputFormat::Csv, rows()),
            "path,size,batch_id,requests\n\"a,b\",10,,GET=2 LIST=1\nc,2000000000000,0,\n"
        );
        let table = print(OutputFormat::Table, rows());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines,
            [
                "path  size           batch_id  requests",
                "a,b   10                       GET=2 LIST=1",
                "c     2000000000000  0",
            ]
        );
    }
}
