//! SQL DDL schemas (`"id BIGINT, name STRING, tags ARRAY<STRING>, price DECIMAL(10,2)"`) to Arrow
//! and back, with Spark's type names so Auto Loader users can paste their schemas unchanged.
//!
//! `TIMESTAMP` is microseconds in UTC (Delta `timestamp`); `TIMESTAMP_NTZ` has no zone.
//! Columns are nullable unless followed by `NOT NULL`. Backticks quote names.

use arrow_schema::{DataType, Field, Fields, Schema, TimeUnit};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema DDL at character {pos}: {msg}")]
pub struct DdlError {
    pub pos: usize,
    pub msg: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Num(u32),
    Sym(char),
}

fn tokenize(s: &str) -> Result<Vec<(usize, Tok)>, DdlError> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '`' {
            let mut name = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => {
                        return Err(DdlError {
                            pos,
                            msg: "unterminated `quoted` name".into(),
                        });
                    }
                    Some((_, '`')) if chars.get(i + 1).map(|x| x.1) == Some('`') => {
                        name.push('`');
                        i += 2;
                    }
                    Some((_, '`')) => {
                        i += 1;
                        break;
                    }
                    Some((_, ch)) => {
                        name.push(*ch);
                        i += 1;
                    }
                }
            }
            out.push((pos, Tok::Ident(name)));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].1.is_ascii_digit() {
                i += 1;
            }
            let text: String = chars[start..i].iter().map(|x| x.1).collect();
            let n = text.parse().map_err(|_| DdlError {
                pos,
                msg: format!("number `{text}` is too large"),
            })?;
            out.push((pos, Tok::Num(n)));
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].1.is_alphanumeric() || chars[i].1 == '_') {
                i += 1;
            }
            out.push((
                pos,
                Tok::Ident(chars[start..i].iter().map(|x| x.1).collect()),
            ));
        } else if "<>(),:.".contains(c) {
            out.push((pos, Tok::Sym(c)));
            i += 1;
        } else {
            return Err(DdlError {
                pos,
                msg: format!("unexpected character `{c}`"),
            });
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    i: usize,
    end: usize,
}

impl Parser {
    fn pos(&self) -> usize {
        self.toks.get(self.i).map(|t| t.0).unwrap_or(self.end)
    }
    fn err<T>(&self, msg: impl Into<String>) -> Result<T, DdlError> {
        Err(DdlError {
            pos: self.pos(),
            msg: msg.into(),
        })
    }
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i).map(|t| &t.1)
    }
    fn eat_sym(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Sym(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect_sym(&mut self, c: char) -> Result<(), DdlError> {
        if self.eat_sym(c) {
            Ok(())
        } else {
            self.err(format!("expected `{c}`"))
        }
    }
    fn ident(&mut self, what: &str) -> Result<String, DdlError> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.i += 1;
                Ok(s)
            }
            _ => self.err(format!("expected {what}")),
        }
    }
    fn num(&mut self) -> Result<u32, DdlError> {
        match self.peek() {
            Some(Tok::Num(n)) => {
                let n = *n;
                self.i += 1;
                Ok(n)
            }
            _ => self.err("expected a number"),
        }
    }
    fn keyword(&mut self, kw: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Ident(s)) if s.eq_ignore_ascii_case(kw)) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// `name TYPE [NOT NULL]`, with an optional `:` between name and type inside STRUCT<>.
    fn field(&mut self, in_struct: bool) -> Result<Field, DdlError> {
        let name = self.ident("a column name")?;
        if in_struct {
            self.eat_sym(':');
        }
        let ty = self.data_type()?;
        let nullable = if self.keyword("NOT") {
            if !self.keyword("NULL") {
                return self.err("expected NULL after NOT");
            }
            false
        } else {
            true
        };
        Ok(Field::new(name, ty, nullable))
    }

    fn data_type(&mut self) -> Result<DataType, DdlError> {
        let pos = self.pos();
        let name = self.ident("a type name")?.to_ascii_uppercase();
        let ty = match name.as_str() {
            "STRING" | "TEXT" => DataType::Utf8,
            "VARCHAR" | "CHAR" => {
                if self.eat_sym('(') {
                    self.num()?;
                    self.expect_sym(')')?;
                }
                DataType::Utf8
            }
            "BIGINT" | "LONG" => DataType::Int64,
            "INT" | "INTEGER" => DataType::Int32,
            "SMALLINT" | "SHORT" => DataType::Int16,
            "TINYINT" | "BYTE" => DataType::Int8,
            "DOUBLE" => DataType::Float64,
            "FLOAT" | "REAL" => DataType::Float32,
            "BOOLEAN" | "BOOL" => DataType::Boolean,
            "DATE" => DataType::Date32,
            "TIMESTAMP" | "TIMESTAMP_LTZ" => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC")))
            }
            "TIMESTAMP_NTZ" => DataType::Timestamp(TimeUnit::Microsecond, None),
            "BINARY" => DataType::Binary,
            "DECIMAL" | "DEC" | "NUMERIC" => {
                let (mut p, mut s) = (10u32, 0u32);
                if self.eat_sym('(') {
                    p = self.num()?;
                    if self.eat_sym(',') {
                        s = self.num()?;
                    }
                    self.expect_sym(')')?;
                }
                if p == 0 || p > 38 || s > p {
                    return Err(DdlError {
                        pos,
                        msg: format!(
                            "DECIMAL({p},{s}) is out of range (precision 1..=38, scale <= precision)"
                        ),
                    });
                }
                DataType::Decimal128(p as u8, s as i8)
            }
            "ARRAY" => {
                self.expect_sym('<')?;
                let item = self.data_type()?;
                self.expect_sym('>')?;
                DataType::List(Arc::new(Field::new("element", item, true)))
            }
            "MAP" => {
                self.expect_sym('<')?;
                let k = self.data_type()?;
                self.expect_sym(',')?;
                let v = self.data_type()?;
                self.expect_sym('>')?;
                let entries = Field::new(
                    "key_value",
                    DataType::Struct(Fields::from(vec![
                        Field::new("key", k, false),
                        Field::new("value", v, true),
                    ])),
                    false,
                );
                DataType::Map(Arc::new(entries), false)
            }
            "STRUCT" => {
                self.expect_sym('<')?;
                let mut fields = Vec::new();
                if !self.eat_sym('>') {
                    loop {
                        fields.push(self.field(true)?);
                        if self.eat_sym('>') {
                            break;
                        }
                        self.expect_sym(',')?;
                    }
                }
                DataType::Struct(Fields::from(fields))
            }
            other => {
                return Err(DdlError {
                    pos,
                    msg: format!("unknown type `{other}`"),
                });
            }
        };
        Ok(ty)
    }
}

/// Parse a DDL column list into an Arrow schema.
pub fn parse_schema(ddl: &str) -> Result<Schema, DdlError> {
    let mut p = Parser {
        toks: tokenize(ddl)?,
        i: 0,
        end: ddl.len(),
    };
    let mut fields: Vec<Field> = Vec::new();
    if p.peek().is_none() {
        return p.err("the schema is empty");
    }
    loop {
        let pos = p.pos();
        let f = p.field(false)?;
        if fields
            .iter()
            .any(|g| g.name().eq_ignore_ascii_case(f.name()))
        {
            return Err(DdlError {
                pos,
                msg: format!("column `{}` is defined twice", f.name()),
            });
        }
        fields.push(f);
        if p.peek().is_none() {
            break;
        }
        p.expect_sym(',')?;
    }
    Ok(Schema::new(fields))
}

/// A schema hint: a column path (`a.b` names field `b` of struct column `a`) and its type.
#[derive(Debug, Clone, PartialEq)]
pub struct Hint {
    pub path: Vec<String>,
    pub field: Field,
}

/// Parse Auto Loader's `schemaHints`: a DDL column list whose names may be dotted paths into
/// structs (`"id BIGINT, user.dob DATE, tags ARRAY<STRING>"`).
pub fn parse_hints(ddl: &str) -> Result<Vec<Hint>, DdlError> {
    let mut p = Parser {
        toks: tokenize(ddl)?,
        i: 0,
        end: ddl.len(),
    };
    let mut hints: Vec<Hint> = Vec::new();
    if p.peek().is_none() {
        return p.err("the hints are empty");
    }
    loop {
        let pos = p.pos();
        let mut path = vec![p.ident("a column name")?];
        while p.eat_sym('.') {
            path.push(p.ident("a field name")?);
        }
        let leaf = path.last().expect("one name").clone();
        let ty = p.data_type()?;
        let nullable = if p.keyword("NOT") {
            if !p.keyword("NULL") {
                return p.err("expected NULL after NOT");
            }
            false
        } else {
            true
        };
        let lower: Vec<String> = path.iter().map(|n| n.to_ascii_lowercase()).collect();
        if hints.iter().any(|h| {
            h.path
                .iter()
                .map(|n| n.to_ascii_lowercase())
                .collect::<Vec<_>>()
                == lower
        }) {
            return Err(DdlError {
                pos,
                msg: format!("column `{}` is hinted twice", path.join(".")),
            });
        }
        hints.push(Hint {
            path,
            field: Field::new(leaf, ty, nullable),
        });
        if p.peek().is_none() {
            break;
        }
        p.expect_sym(',')?;
    }
    Ok(hints)
}

/// Render an Arrow type with Spark's names (the inverse of [`parse_schema`] for the types it knows).
pub fn type_to_ddl(ty: &DataType) -> String {
    match ty {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Float32 => "FLOAT".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Date32 => "DATE".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP_NTZ".into(),
        DataType::Binary | DataType::LargeBinary => "BINARY".into(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p},{s})"),
        DataType::List(f) | DataType::LargeList(f) => {
            format!("ARRAY<{}>", type_to_ddl(f.data_type()))
        }
        DataType::Struct(fs) => format!(
            "STRUCT<{}>",
            fs.iter()
                .map(|f| format!("{}: {}", quote(f.name()), type_to_ddl(f.data_type())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DataType::Map(e, _) => match e.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!(
                    "MAP<{}, {}>",
                    type_to_ddl(kv[0].data_type()),
                    type_to_ddl(kv[1].data_type())
                )
            }
            other => format!("{other:?}"),
        },
        other => format!("{other:?}"),
    }
}

/// A column name as DDL: bare when it reads back as that name, else between backticks (a
/// name starting with a digit, or a word the grammar gives a meaning; found by fuzzing:
/// `000` printed bare did not parse again).
fn quote(name: &str) -> String {
    const WORDS: [&str; 3] = ["NOT", "NULL", "COMMENT"];
    let bare = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !WORDS.iter().any(|w| w.eq_ignore_ascii_case(name));
    if bare {
        name.to_string()
    } else {
        format!("`{}`", name.replace('`', "``"))
    }
}

/// Render a schema as a DDL column list.
pub fn schema_to_ddl(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| {
            let nn = if f.is_nullable() { "" } else { " NOT NULL" };
            format!("{} {}{}", quote(f.name()), type_to_ddl(f.data_type()), nn)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spark_types_and_round_trips() {
        let ddl = "id BIGINT NOT NULL, name STRING, price DECIMAL(10,2), ts TIMESTAMP, d DATE, \
                   tags ARRAY<STRING>, info STRUCT<a: INT, `b c`: ARRAY<DOUBLE>>, m MAP<STRING, BIGINT>, ok BOOLEAN";
        let s = parse_schema(ddl).unwrap();
        assert_eq!(s.fields().len(), 9);
        assert_eq!(s.field(0).data_type(), &DataType::Int64);
        assert!(!s.field(0).is_nullable());
        assert_eq!(s.field(2).data_type(), &DataType::Decimal128(10, 2));
        let again = parse_schema(&schema_to_ddl(&s)).unwrap();
        assert_eq!(again, s);
    }

    #[test]
    fn errors_name_the_position_and_reason() {
        assert_eq!(
            parse_schema("id BIGINT, name STRNG")
                .unwrap_err()
                .to_string(),
            "schema DDL at character 16: unknown type `STRNG`"
        );
        assert_eq!(
            parse_schema("id BIGINT name STRING")
                .unwrap_err()
                .to_string(),
            "schema DDL at character 10: expected `,`"
        );
        assert_eq!(
            parse_schema("a INT, A STRING").unwrap_err().msg,
            "column `A` is defined twice"
        );
        assert_eq!(
            parse_schema("x DECIMAL(40,2)").unwrap_err().msg,
            "DECIMAL(40,2) is out of range (precision 1..=38, scale <= precision)"
        );
        assert_eq!(parse_schema("  ").unwrap_err().msg, "the schema is empty");
        assert_eq!(parse_schema("a ARRAY<INT").unwrap_err().msg, "expected `>`");
    }
}
