//! Splitting the streams of one configuration over N processes: `landfall run --shard i/N`
//! runs the streams whose stable hash falls in shard i. The hash is FNV-1a (64 bit) of the
//! stream's shard key ([`shard_key`]): fixed by its definition, so every process of every
//! version agrees on which shard owns a stream, and a stream keeps its shard (and its state
//! volume) across restarts.
//!
//! The key of a stream reading a file-events location is the location (`location:<name>`),
//! of any other stream its name. A location has one consumer and one event cache, in the
//! process that runs its streams: were its streams split over two processes with their own
//! state volumes, each would start a consumer on the one queue, each consumer would receive
//! and delete what the other's streams needed, and both would lose events. Keyed by the
//! location, all its streams and its one consumer run in one shard.
//!
//! `--shard auto` is for a Kubernetes StatefulSet: the index is the ordinal at the end of the
//! pod's hostname (`landfall-2` is shard 2) and the count comes from `LANDFALL_SHARDS`.

use std::fmt;

/// One shard of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// FNV-1a, 64 bit.
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// What a stream is sharded by: its file-events location, or its name.
pub fn shard_key(spec: &landfall_config::StreamSpec) -> String {
    match crate::locations::of_stream(spec) {
        Some(l) => format!("location:{}", l.name),
        None => spec.name.clone(),
    }
}

impl Shard {
    /// Whether this shard runs the streams of shard key `key` ([`shard_key`]).
    pub fn owns(&self, key: &str) -> bool {
        fnv1a(key) % self.count as u64 == self.index as u64
    }

    /// Whether this shard runs `spec`.
    pub fn runs(&self, spec: &landfall_config::StreamSpec) -> bool {
        self.owns(&shard_key(spec))
    }

    /// `i/N` (0 <= i < N), or `auto` with `hostname` and `shards` (LANDFALL_SHARDS).
    pub fn parse(
        spec: &str,
        hostname: Option<&str>,
        shards: Option<&str>,
    ) -> Result<Shard, String> {
        let (index, count) = if spec == "auto" {
            let host = hostname.ok_or(
                "--shard auto needs the host name (HOSTNAME) to end in the shard index, as a \
                 StatefulSet pod's does (landfall-0, landfall-1, ...)",
            )?;
            let ordinal = host.rsplit('-').next().unwrap_or(host);
            let index = ordinal.parse::<u32>().map_err(|_| {
                format!("--shard auto: host name `{host}` does not end in `-<index>`")
            })?;
            let count = shards
                .ok_or("--shard auto needs LANDFALL_SHARDS, the number of shards (replicas)")?
                .parse::<u32>()
                .map_err(|_| "LANDFALL_SHARDS must be a positive number".to_string())?;
            (index, count)
        } else {
            let (i, n) = spec.split_once('/').ok_or_else(|| {
                format!("--shard `{spec}`: expected i/N (for example 0/3) or auto")
            })?;
            let parse = |v: &str| {
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("--shard `{spec}`: `{v}` is not a number"))
            };
            (parse(i)?, parse(n)?)
        };
        if count == 0 || index >= count {
            return Err(format!(
                "--shard {index}/{count}: the index must be below the shard count"
            ));
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stream_has_exactly_one_shard() {
        let names: Vec<String> = (0..200).map(|i| format!("stream-{i}")).collect();
        for count in 1..6 {
            let shards: Vec<Shard> = (0..count).map(|index| Shard { index, count }).collect();
            let mut per_shard = vec![0; count as usize];
            for n in &names {
                let owners: Vec<_> = shards.iter().filter(|s| s.owns(n)).collect();
                assert_eq!(owners.len(), 1, "{n} in {count} shards");
                per_shard[owners[0].index as usize] += 1;
            }
            // Not a uniformity proof, but no shard is starved.
            assert!(
                per_shard.iter().all(|&c| c > 200 / count as usize / 3),
                "{per_shard:?}"
            );
        }
    }

    #[test]
    fn the_hash_is_fixed() {
        // FNV-1a test vectors: a change here would move every stream to another shard.
        assert_eq!(fnv1a(""), 0xcbf29ce484222325);
        assert_eq!(fnv1a("a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a("foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn parses_explicit_and_auto() {
        assert_eq!(
            Shard::parse("1/3", None, None),
            Ok(Shard { index: 1, count: 3 })
        );
        assert_eq!(
            Shard::parse("auto", Some("landfall-2"), Some("3")),
            Ok(Shard { index: 2, count: 3 })
        );
        assert!(Shard::parse("3/3", None, None).is_err());
        assert!(Shard::parse("0/0", None, None).is_err());
        assert!(Shard::parse("x", None, None).is_err());
        assert!(Shard::parse("auto", Some("landfall"), Some("3")).is_err());
        assert!(Shard::parse("auto", Some("landfall-1"), None).is_err());
        assert!(Shard::parse("auto", Some("landfall-3"), Some("3")).is_err());
    }
}
