//! `schema_hints` on an inferred schema: a hinted column (or nested field) takes the hint's
//! type, and one the sample lacks is added, with its parents as structs.

use arrow_schema::{DataType, Field, Schema};
use landfall_core::SeamError;
use landfall_core::seams::SeamResult;

/// `schema_hints` applied to an inferred schema: each hinted column (or nested field) takes
/// the hint's type; one the sample lacks is added (its parents too, as structs).
pub fn apply_hints(
    stream: &str,
    schema: Schema,
    hints: &[landfall_core::ddl::Hint],
) -> SeamResult<Schema> {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for h in hints {
        hint_into(&mut fields, &h.path, &h.field).map_err(|reason| {
            SeamError::fatal(format!(
                "stream `{stream}`: schema_hints `{}`: {reason}",
                h.path.join(".")
            ))
        })?;
    }
    Ok(Schema::new(fields))
}

fn hint_into(fields: &mut Vec<Field>, path: &[String], hint: &Field) -> Result<(), String> {
    let (first, rest) = path.split_first().expect("a hint names a column");
    let at = fields.iter().position(|f| f.name() == first).or_else(|| {
        fields
            .iter()
            .position(|f| f.name().eq_ignore_ascii_case(first))
    });
    if rest.is_empty() {
        let f = hint
            .clone()
            .with_name(at.map_or(first.clone(), |i| fields[i].name().clone()));
        match at {
            Some(i) => fields[i] = f,
            None => fields.push(f),
        }
        return Ok(());
    }
    let i = match at {
        Some(i) => i,
        None => {
            fields.push(Field::new(
                first,
                DataType::Struct(Default::default()),
                true,
            ));
            fields.len() - 1
        }
    };
    let mut children: Vec<Field> = match fields[i].data_type() {
        DataType::Struct(c) => c.iter().map(|f| f.as_ref().clone()).collect(),
        other => {
            return Err(format!(
                "`{}` is {}, not a struct",
                fields[i].name(),
                landfall_core::ddl::type_to_ddl(other)
            ));
        }
    };
    hint_into(&mut children, rest, hint)?;
    fields[i] = fields[i]
        .clone()
        .with_data_type(DataType::Struct(children.into()));
    Ok(())
}
