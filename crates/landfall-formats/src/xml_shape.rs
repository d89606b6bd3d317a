//! The shapes of XML rows as JSON values. XML cannot say whether an element is one value or
//! a list of one, a text or a struct: across the rows of a file (for inference) an element
//! repeated anywhere is an array everywhere, and one with attributes or children anywhere is a
//! struct everywhere; against a schema (when decoding) each value takes the shape its column
//! has.

use arrow_schema::{DataType, Fields};
use serde_json::{Map, Value};

pub(crate) type Paths = std::collections::HashSet<Vec<String>>;

/// The paths (keys from the row) holding arrays and objects anywhere in `v`.
pub(crate) fn shapes(v: &Value, path: &mut Vec<String>, arrays: &mut Paths, objects: &mut Paths) {
    match v {
        Value::Array(items) => {
            arrays.insert(path.clone());
            for i in items {
                shapes(i, path, arrays, objects);
            }
        }
        Value::Object(m) => {
            if !path.is_empty() {
                objects.insert(path.clone());
            }
            for (k, child) in m {
                path.push(k.clone());
                shapes(child, path, arrays, objects);
                path.pop();
            }
        }
        _ => {}
    }
}

pub(crate) fn reshape(
    v: &mut Value,
    path: &mut Vec<String>,
    arrays: &Paths,
    objects: &Paths,
    tag: &str,
) {
    if v.is_null() {
        return;
    }
    if arrays.contains(path) && !v.is_array() {
        *v = Value::Array(vec![v.take()]);
    }
    let to_object = objects.contains(path);
    let items: Vec<&mut Value> = match v {
        Value::Array(items) => items.iter_mut().collect(),
        other => vec![other],
    };
    for item in items {
        if to_object && !item.is_object() && !item.is_null() {
            let mut m = Map::new();
            m.insert(tag.to_string(), item.take());
            *item = Value::Object(m);
        }
        if let Value::Object(m) = item {
            for (k, child) in m.iter_mut() {
                path.push(k.clone());
                reshape(child, path, arrays, objects, tag);
                path.pop();
            }
        }
    }
}

/// `value` shaped to `fields` where XML cannot say: an array field gets an array of one for a
/// single element; a struct field gets `{value_tag: text}` for an element with only text.
pub(crate) fn fit_shape(value: &mut Value, ty: &DataType, value_tag: &str) {
    match ty {
        DataType::List(item) | DataType::LargeList(item) => {
            if !value.is_array() && !value.is_null() {
                *value = Value::Array(vec![value.take()]);
            }
            if let Value::Array(items) = value {
                for v in items {
                    fit_shape(v, item.data_type(), value_tag);
                }
            }
        }
        DataType::Struct(children) => {
            if !value.is_object() && !value.is_null() && !value.is_array() {
                let mut m = Map::new();
                m.insert(value_tag.to_string(), value.take());
                *value = Value::Object(m);
            }
            if let Value::Object(m) = value {
                fit_fields(m, children, value_tag);
            }
        }
        // XML has no booleans: the text is; arrow-json reads only JSON booleans into BOOLEAN.
        DataType::Boolean => {
            if let Some(b) = value.as_str().and_then(|s| match s.trim() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            }) {
                *value = Value::Bool(b);
            }
        }
        _ => {}
    }
}

pub(crate) fn fit_fields(m: &mut Map<String, Value>, fields: &Fields, value_tag: &str) {
    for f in fields {
        if let Some(v) = m.get_mut(f.name()) {
            fit_shape(v, f.data_type(), value_tag);
        }
    }
}
