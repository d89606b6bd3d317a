//! Which Delta tables landfall may append to: the protocol check run by `prepare` (before any
//! data file is written) and again before every commit.
//!
//! Contract: [`check_writable`] accepts a table only if every table feature its protocol puts in
//! force (listed, for reader 3 / writer 7 tables; implied by the version, for older ones) is one
//! landfall honours for blind appends, and refuses it otherwise with [`SinkError::Unsupported`]
//! naming the feature, why, and what to do. A refused table is fatal for the stream: retrying
//! cannot make it writable.
//!
//! Honoured: `appendOnly` (we only add files), `timestampNtz` (zone-less timestamps are written
//! as NTZ), `deletionVectors` (the protocol lets a blind append add files without deletion
//! vectors; readers apply vectors only to the files that carry one), `v2Checkpoint` (the kernel
//! writes checkpoints in the table's format), `checkpointProtection` (we clean no logs on such
//! tables), `variantType` (we never write variant values; a variant column must then be nullable
//! like any column the stream lacks), `rowTracking` (the kernel gives every add its base row id
//! and commit version and advances the high-water mark in the `delta.rowTracking` domain),
//! `inCommitTimestamp` (the kernel writes a monotonic one in every commitInfo),
//! `domainMetadata` (kept as it is), `typeWidening` (data files are written in the table's
//! current types), `vacuumProtocolCheck`, `changeDataFeed` (appends need no change data).
//!
//! Refused when in use, because writers must act on every row or file and landfall does not:
//! CHECK constraints (`delta.constraints.*`), generated columns (`delta.generationExpression`),
//! identity columns (`delta.identity.*`), invariants (`delta.invariants`). Column mapping
//! (`delta.columnMapping.mode` name/id) is written: files in physical names with field ids
//! (`delta::column_mapping`). Refused when merely in
//! force: what the Delta kernel landfall is built with (delta_kernel 0.30) refuses to commit to
//! (legacy writer versions 3 to 6, which imply CHECK constraints; generated and identity
//! columns), `clustering` (the kernel needs stats of the clustering columns on every file, which
//! landfall's writer does not always have), features that oblige writers to do more (column
//! defaults, catalog-managed commits, Iceberg compatibility, ...), and any feature name landfall
//! does not recognise.

use crate::error::SinkError;
use delta_kernel::Snapshot;
use std::collections::{BTreeSet, HashMap};

/// How commits must behave on a table [`check_writable`] accepted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Writability {
    /// Expired log entries may be cleaned after a checkpoint (not on `checkpointProtection`
    /// tables).
    pub cleanup_expired_logs: bool,
}

/// What the check needs to know about a table, free of kernel types (unit-testable).
#[derive(Debug, Default, Clone)]
pub(crate) struct TableFacts {
    pub reader_version: i32,
    pub writer_version: i32,
    pub reader_features: Option<Vec<String>>,
    pub writer_features: Option<Vec<String>>,
    pub configuration: HashMap<String, String>,
    /// Every field (nested ones as `a.b`) with its metadata, from the schema JSON.
    pub fields: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
}

/// Features implied by legacy (pre table-features) writer versions, with the version that
/// introduced each.
const LEGACY_WRITER: &[(&str, i32)] = &[
    ("appendOnly", 2),
    ("invariants", 2),
    ("checkConstraints", 3),
    ("changeDataFeed", 4),
    ("generatedColumns", 4),
    ("columnMapping", 5),
    ("identityColumns", 6),
];

const LIBRARY_REFUSES: &str = "nothing landfall writes depends on it, but the Delta kernel \
     landfall is built with (delta_kernel 0.30) refuses to commit to any table whose protocol \
     includes it, even when no column uses it";

const UNKNOWN: &str = "landfall does not know this table feature, so it cannot honour what \
     it asks of writers";

/// Why landfall cannot honour `feature`, or `None` when it can.
fn refusal(feature: &str) -> Option<&'static str> {
    Some(match feature {
        // Nothing to do for appends, or done by the kernel on every commit: row ids, their
        // commit versions and the high-water mark (rowTracking), a monotonic in-commit
        // timestamp, domain metadata kept as it is (clustering's included); checkpoints in the
        // table's format (v2Checkpoint). invariants, columnMapping and changeDataFeed are
        // refused by `in_use` when a column or the table uses them.
        "appendOnly"
        | "timestampNtz"
        | "timestampWithoutTimezone"
        | "deletionVectors"
        | "v2Checkpoint"
        | "checkpointProtection"
        | "variantType"
        | "variantType-preview"
        | "variantShredding"
        | "variantShredding-preview"
        | "rowTracking"
        | "inCommitTimestamp"
        | "domainMetadata"
        | "typeWidening"
        | "typeWidening-preview"
        | "vacuumProtocolCheck"
        | "changeDataFeed"
        | "invariants"
        | "columnMapping" => return None,
        "checkConstraints" | "generatedColumns" | "identityColumns" | "geospatial" => {
            LIBRARY_REFUSES
        }
        "clustering" => {
            "the Delta kernel requires min, max and null-count stats of the clustering columns \
             on every added file, and landfall's writer leaves some out (columns past the 32nd, \
             NaN floats, strings it cannot bound), which would fail a commit after its data \
             files are written"
        }
        "allowColumnDefaults" => {
            "writers must fill columns with defaults that the data lacks; landfall does not \
             evaluate default expressions"
        }
        "catalogManaged" | "catalogOwned-preview" => {
            "commits must go through the table's catalog, while landfall commits to the \
             object store"
        }
        "icebergCompatV1" | "icebergCompatV2" | "icebergCompatV3" => {
            "writers must keep the table readable as Iceberg (column mapping, Iceberg \
             metadata); landfall does not"
        }
        "materializePartitionColumns" => {
            "partition values must also be stored in the data files; landfall leaves partition \
             columns out of them"
        }
        "timestampNanos" => {
            "nanosecond timestamps are not a Delta type landfall writes or the Delta kernel \
             knows"
        }
        _ => UNKNOWN,
    })
}

impl TableFacts {
    pub(crate) fn of(table: &Snapshot) -> Result<Self, String> {
        let config = table.table_configuration();
        let protocol = config.protocol();
        let metadata = config.metadata();
        let schema: serde_json::Value =
            serde_json::from_str(metadata.schema_string()).map_err(|e| e.to_string())?;
        let mut fields = Vec::new();
        collect_fields("", &schema, &mut fields);
        Ok(TableFacts {
            reader_version: protocol.min_reader_version(),
            writer_version: protocol.min_writer_version(),
            reader_features: protocol
                .reader_features()
                .map(|fs| fs.iter().map(|f| f.to_string()).collect()),
            writer_features: protocol
                .writer_features()
                .map(|fs| fs.iter().map(|f| f.to_string()).collect()),
            configuration: metadata.configuration().clone(),
            fields,
        })
    }

    /// Whether the protocol puts `feature` in force (listed, or implied by the versions).
    fn supports(&self, feature: &str) -> bool {
        if self.writer_version >= 7 {
            let listed = |l: &Option<Vec<String>>| l.iter().flatten().any(|f| f == feature);
            return listed(&self.writer_features) || listed(&self.reader_features);
        }
        (feature == "columnMapping" && self.reader_version >= 2)
            || LEGACY_WRITER
                .iter()
                .any(|(f, v)| *f == feature && self.writer_version >= *v)
    }

    /// Every feature in force, each with a note on where it comes from.
    fn features(&self) -> Vec<(String, String)> {
        let mut out: BTreeSet<(String, String)> = BTreeSet::new();
        if self.writer_version >= 7 {
            for f in self.writer_features.iter().flatten() {
                out.insert((f.clone(), "listed in the table's writer features".into()));
            }
        } else {
            for (f, v) in LEGACY_WRITER {
                // Legacy writer 2 implies invariants, which only matter when a column has one
                // (checked by `in_use`), and which the kernel accepts at that version.
                if self.writer_version >= *v && !(self.writer_version == 2 && *f == "invariants") {
                    out.insert((
                        f.to_string(),
                        format!(
                            "implied by the table's legacy writer version {}",
                            self.writer_version
                        ),
                    ));
                }
            }
        }
        if self.reader_version >= 3 {
            for f in self.reader_features.iter().flatten() {
                out.insert((f.clone(), "listed in the table's reader features".into()));
            }
        } else if self.reader_version == 2 {
            out.insert((
                "columnMapping".into(),
                "implied by the table's legacy reader version 2".into(),
            ));
        }
        // One entry per feature (a reader-writer feature is listed twice).
        let mut seen = BTreeSet::new();
        out.into_iter()
            .filter(|(f, _)| seen.insert(f.clone()))
            .collect()
    }

    /// Features that are not only in force but used, each needing writers to act on the data.
    fn in_use(&self) -> Result<(), (String, String)> {
        if self.supports("checkConstraints") {
            let mut constraints: Vec<_> = self
                .configuration
                .iter()
                .filter_map(|(k, v)| Some((k.strip_prefix("delta.constraints.")?, v)))
                .collect();
            constraints.sort();
            if let Some((name, expr)) = constraints.first() {
                return Err((
                    "checkConstraints".into(),
                    format!(
                        "CHECK constraint `{name}` ({expr}) must hold for every row written, \
                         and landfall does not evaluate SQL expressions; drop the constraint \
                         (ALTER TABLE ... DROP CONSTRAINT {name}) or write to another table"
                    ),
                ));
            }
        }
        for (path, meta) in &self.fields {
            if let Some(expr) = meta.get("delta.generationExpression")
                && self.supports("generatedColumns")
            {
                return Err((
                    "generatedColumns".into(),
                    format!(
                        "column `{path}` is generated as `{}`, which writers must compute; \
                         landfall does not; write to a table without generated columns",
                        text(expr)
                    ),
                ));
            }
            if meta.keys().any(|k| k.starts_with("delta.identity."))
                && self.supports("identityColumns")
            {
                return Err((
                    "identityColumns".into(),
                    format!(
                        "column `{path}` is an identity column, whose values writers must \
                         assign; landfall does not; write to a table without identity columns"
                    ),
                ));
            }
            if let Some(inv) = meta.get("delta.invariants")
                && self.supports("invariants")
            {
                return Err((
                    "invariants".into(),
                    format!(
                        "column `{path}` has the invariant {}, which must hold for every \
                         row written, and landfall does not evaluate SQL expressions; remove \
                         it or write to another table",
                        text(inv)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The check itself, on facts alone.
    pub(crate) fn check(&self) -> Result<Writability, (String, String)> {
        self.in_use()?;
        let features = self.features();
        // Name the most telling refusal (what writers must do, then unknown names, then what
        // only the library refuses) and list the others.
        let mut refused: Vec<_> = features
            .iter()
            .filter_map(|(f, origin)| {
                let why = refusal(f)?;
                let rank = if why == LIBRARY_REFUSES {
                    2
                } else if why == UNKNOWN {
                    1
                } else {
                    0
                };
                Some((rank, f, origin, why))
            })
            .collect();
        refused.sort_by_key(|(rank, ..)| *rank);
        if let Some((_, f, origin, why)) = refused.first() {
            let others: Vec<&str> = refused[1..].iter().map(|(_, f, ..)| f.as_str()).collect();
            let also = if others.is_empty() {
                String::new()
            } else {
                format!(" (it also uses {}, refused as well)", others.join(", "))
            };
            return Err((
                f.to_string(),
                format!(
                    "{why} ({origin}); write to a table without it, or let landfall create \
                     the table{also}"
                ),
            ));
        }
        let has = |name: &str| features.iter().any(|(f, _)| f == name);
        Ok(Writability {
            cleanup_expired_logs: !has("checkpointProtection"),
        })
    }
}

/// A metadata value as text: strings unquoted.
fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Walk a Delta schema JSON, collecting every struct field's path and metadata.
fn collect_fields(
    prefix: &str,
    ty: &serde_json::Value,
    out: &mut Vec<(String, serde_json::Map<String, serde_json::Value>)>,
) {
    let Some(obj) = ty.as_object() else {
        return; // a primitive type name
    };
    match obj.get("type").and_then(|t| t.as_str()) {
        Some("struct") => {
            for f in obj
                .get("fields")
                .and_then(|f| f.as_array())
                .into_iter()
                .flatten()
            {
                let name = f.get("name").and_then(|n| n.as_str()).unwrap_or_default();
                let path = if prefix.is_empty() {
                    name.to_string()
                } else {
                    format!("{prefix}.{name}")
                };
                if let Some(meta) = f.get("metadata").and_then(|m| m.as_object()) {
                    out.push((path.clone(), meta.clone()));
                }
                if let Some(t) = f.get("type") {
                    collect_fields(&path, t, out);
                }
            }
        }
        Some("array") => {
            if let Some(t) = obj.get("elementType") {
                collect_fields(&format!("{prefix}.element"), t, out);
            }
        }
        Some("map") => {
            for (k, seg) in [("keyType", "key"), ("valueType", "value")] {
                if let Some(t) = obj.get(k) {
                    collect_fields(&format!("{prefix}.{seg}"), t, out);
                }
            }
        }
        _ => {}
    }
}

/// Refuse a table landfall cannot append to correctly (see the module docs).
pub(crate) fn check_writable(location: &str, table: &Snapshot) -> Result<Writability, SinkError> {
    let unsupported = |feature: String, reason: String| SinkError::Unsupported {
        location: location.to_string(),
        feature,
        reason,
    };
    let facts = TableFacts::of(table)
        .map_err(|e| unsupported("schema".into(), format!("unreadable schema: {e}")))?;
    let writability = facts.check().map_err(|(f, why)| unsupported(f, why))?;
    // Backstop: anything the library would refuse at commit time (after the data files are
    // written) is refused now, with its own words.
    let config = table.table_configuration();
    config
        .ensure_operation_supported(delta_kernel::table_features::Operation::Write)
        .map_err(|e| {
            unsupported(
                format!(
                    "protocol reader {} / writer {}",
                    facts.reader_version, facts.writer_version
                ),
                format!("the Delta kernel landfall is built with refuses to write it: {e}"),
            )
        })?;
    Ok(writability)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(reader: i32, writer: i32, features: &[&str]) -> TableFacts {
        let list = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
        TableFacts {
            reader_version: reader,
            writer_version: writer,
            reader_features: (reader >= 3).then(|| list(features)).flatten(),
            writer_features: (writer >= 7).then(|| list(features)).flatten(),
            ..Default::default()
        }
    }

    #[test]
    fn landfall_created_tables_are_writable() {
        assert!(facts(1, 2, &[]).check().is_ok());
        assert!(facts(3, 7, &["timestampNtz"]).check().is_ok());
        let w = facts(3, 7, &["deletionVectors", "v2Checkpoint", "appendOnly"])
            .check()
            .unwrap();
        assert!(w.cleanup_expired_logs);
        let w = facts(3, 7, &["checkpointProtection"]).check().unwrap();
        assert!(!w.cleanup_expired_logs);
    }

    #[test]
    fn features_databricks_enables_are_writable() {
        let w = facts(
            3,
            7,
            &[
                "rowTracking",
                "inCommitTimestamp",
                "domainMetadata",
                "deletionVectors",
                "v2Checkpoint",
                "typeWidening",
                "vacuumProtocolCheck",
                "changeDataFeed",
                "columnMapping",
                "invariants",
            ],
        )
        .check();
        assert!(w.is_ok(), "{w:?}");
    }

    #[test]
    fn legacy_versions_imply_features() {
        let (f, why) = facts(1, 3, &[]).check().unwrap_err();
        assert_eq!(f, "checkConstraints");
        assert!(why.contains("legacy writer version 3"), "{why}");
        // The kernel refuses legacy writer versions 3 to 6 (they imply CHECK constraints).
        let (f, why) = facts(2, 5, &[]).check().unwrap_err();
        assert_eq!(f, "checkConstraints");
        assert!(why.contains("kernel"), "{why}");
        let (f, _) = facts(1, 7, &["catalogManaged"]).check().unwrap_err();
        assert_eq!(f, "catalogManaged");
        let (f, why) = facts(1, 7, &["shinyNewThing"]).check().unwrap_err();
        assert_eq!(f, "shinyNewThing");
        assert!(why.contains("does not know"), "{why}");
    }

    #[test]
    fn nested_field_metadata_is_found() {
        let schema = serde_json::json!({"type": "struct", "fields": [
            {"name": "s", "nullable": true, "metadata": {}, "type": {"type": "struct", "fields": [
                {"name": "x", "type": "integer", "nullable": true,
                 "metadata": {"delta.invariants": "{\"expression\":{\"expression\":\"x > 0\"}}"}}
            ]}}
        ]});
        let mut fields = Vec::new();
        collect_fields("", &schema, &mut fields);
        let mut f = facts(1, 2, &[]);
        f.fields = fields;
        let (feature, why) = f.check().unwrap_err();
        assert_eq!(feature, "invariants");
        assert!(why.contains("`s.x`"), "{why}");
    }
}
