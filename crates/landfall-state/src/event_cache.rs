//! The event cache of a storage location (managed file events): every object-created event
//! the location's queue delivered, under a monotonically increasing sequence number, kept for
//! the location's retention. Streams under the location read it from their own position.
//!
//! Key layout (one RocksDB per location, `<state_dir>/_locations/<name>`; see
//! docs/file-events.md):
//! - `e/<seq, 20 digits>`          -> [`CachedEvent`] (JSON)
//! - `k/<path>\0<etag or version>` -> seq: the same (path, etag) is stored once
//! - `m/last_seq`                  -> the last sequence number given (never reused)
//! - `m/expired_through`           -> the highest sequence number expiry removed: a stream
//!   whose position is below it may have missed events and must list
//! - `m/count`                     -> events held
//! - `m/id`                        -> this cache's identity (random, made at creation): a
//!   position taken in another cache (the directory deleted, or restored from a copy of
//!   another) is not a position in this one
//! - `m/user/<name>`               -> the consumer's notes (last round, last listing, setup)
//!
//! Appends, removals and expiry each write one synced batch under a mutex, so sequence
//! numbers become visible in order and without holes: a reader that saw `n` saw every
//! retained event below `n`.

use crate::error::StateError;
use crate::kv::{Kv, KvError, KvOp};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

const LAST_SEQ: &[u8] = b"m/last_seq";
const EXPIRED_THROUGH: &[u8] = b"m/expired_through";
const COUNT: &[u8] = b"m/count";
const ID: &[u8] = b"m/id";
/// Events examined per expiry write.
const EXPIRE_CHUNK: usize = 10_000;

/// An object-created event, as the consumer hands it to the cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewEvent {
    /// Object path inside the bucket or container (object_store form, no leading `/`).
    pub path: String,
    pub size: u64,
    /// Quoted, as object_store reports it.
    pub etag: Option<String>,
    pub version: Option<String>,
    /// When the object was written (the event's time).
    pub modified: DateTime<Utc>,
    /// The storage service's ordering token for the key (S3 and Event Grid `sequencer`).
    pub sequencer: Option<String>,
}

/// An event held by the cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedEvent {
    pub seq: u64,
    #[serde(flatten)]
    pub event: NewEvent,
    /// When it entered the cache (retention counts from here).
    pub cached: DateTime<Utc>,
}

/// What the cache holds, for `landfall locations`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    pub events: u64,
    /// The last sequence number given.
    pub last_seq: u64,
    /// Sequence numbers at or below this were expired.
    pub expired_through: u64,
    pub oldest: Option<DateTime<Utc>>,
    pub newest: Option<DateTime<Utc>>,
}

fn event_key(seq: u64) -> Vec<u8> {
    format!("e/{seq:020}").into_bytes()
}
fn identity_prefix(path: &str) -> Vec<u8> {
    format!("k/{path}\0").into_bytes()
}
/// An etag without its quotes and weak marker: stores and events disagree on quoting.
pub fn bare_etag(etag: &str) -> &str {
    etag.trim_start_matches("W/").trim_matches('"')
}

impl NewEvent {
    /// What tells this version of the object apart: its bare etag, else its version.
    pub fn version_tag(&self) -> &str {
        self.etag
            .as_deref()
            .map(bare_etag)
            .or(self.version.as_deref())
            .unwrap_or("")
    }
}

fn identity_key(e: &NewEvent) -> Vec<u8> {
    let mut k = identity_prefix(&e.path);
    k.extend_from_slice(e.version_tag().as_bytes());
    k
}

pub struct EventCache<K: Kv> {
    location: String,
    kv: K,
    lock: Mutex<()>,
}

impl<K: Kv> EventCache<K> {
    pub fn new(location: &str, kv: K) -> Self {
        EventCache {
            location: location.to_string(),
            kv,
            lock: Mutex::new(()),
        }
    }

    fn backend(&self, op: &'static str) -> impl Fn(KvError) -> StateError + '_ {
        move |e| match e {
            KvError::Damaged { dir, reason } => StateError::CacheDamaged {
                location: self.location.clone(),
                dir,
                reason,
            },
            KvError::Failed(reason) => StateError::Backend {
                stream: format!("location {}", self.location),
                op,
                reason,
            },
        }
    }

    fn get_u64(&self, key: &[u8]) -> Result<u64, StateError> {
        let raw = self.kv.get(key).map_err(self.backend("read"))?;
        Ok(raw
            .and_then(|r| <[u8; 8]>::try_from(r.as_slice()).ok())
            .map_or(0, u64::from_be_bytes))
    }

    fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn decode(&self, key: &[u8], value: &[u8]) -> Result<CachedEvent, StateError> {
        serde_json::from_slice(value).map_err(|e| StateError::Corrupt {
            stream: format!("location {}", self.location),
            key: String::from_utf8_lossy(key).into_owned(),
            reason: e.to_string(),
        })
    }

    /// Store the events the cache does not hold yet (by path and etag), each under the next
    /// sequence number, in one durable write. Returns how many were new.
    pub fn append(&self, events: &[NewEvent], now: DateTime<Utc>) -> Result<u64, StateError> {
        let _g = self.guard();
        let mut seq = self.get_u64(LAST_SEQ)?;
        let mut count = self.get_u64(COUNT)?;
        // New events of this batch by identity (a duplicate inside the batch keeps the later
        // sequencer), and held events whose sequencer a later duplicate moves on: the same
        // content deleted and uploaded again must not be dropped by the removal between.
        let mut fresh: Vec<(Vec<u8>, CachedEvent)> = Vec::new();
        let mut index: std::collections::HashMap<Vec<u8>, usize> = Default::default();
        let mut moved: std::collections::HashMap<u64, CachedEvent> = Default::default();
        let later = |new: &Option<String>, old: &Option<String>| match (new, old) {
            (Some(n), Some(o)) => seq_after(n, o),
            (Some(_), None) => true,
            _ => false,
        };
        for e in events {
            let id = identity_key(e);
            if let Some(&i) = index.get(&id) {
                if later(&e.sequencer, &fresh[i].1.event.sequencer) {
                    fresh[i].1.event.sequencer = e.sequencer.clone();
                }
                continue;
            }
            if let Some(raw) = self.kv.get(&id).map_err(self.backend("read"))? {
                let Ok(held) = <[u8; 8]>::try_from(raw.as_slice()).map(u64::from_be_bytes) else {
                    continue;
                };
                let k = event_key(held);
                let mut rec = match moved.remove(&held) {
                    Some(r) => r,
                    None => match self.kv.get(&k).map_err(self.backend("read"))? {
                        Some(v) => self.decode(&k, &v)?,
                        None => continue,
                    },
                };
                if later(&e.sequencer, &rec.event.sequencer) {
                    rec.event.sequencer = e.sequencer.clone();
                }
                moved.insert(held, rec);
                continue;
            }
            seq += 1;
            count += 1;
            index.insert(id.clone(), fresh.len());
            fresh.push((
                id,
                CachedEvent {
                    seq,
                    event: e.clone(),
                    cached: now,
                },
            ));
        }
        let mut ops = Vec::with_capacity(fresh.len() * 2 + moved.len() + 2);
        for (id, rec) in &fresh {
            ops.push(KvOp::Put(
                event_key(rec.seq),
                serde_json::to_vec(rec).expect("event serialises"),
            ));
            ops.push(KvOp::Put(id.clone(), rec.seq.to_be_bytes().to_vec()));
        }
        let added = fresh.len() as u64;
        for (held, rec) in moved {
            ops.push(KvOp::Put(
                event_key(held),
                serde_json::to_vec(&rec).expect("event serialises"),
            ));
        }
        if ops.is_empty() {
            return Ok(0);
        }
        ops.push(KvOp::Put(LAST_SEQ.to_vec(), seq.to_be_bytes().to_vec()));
        ops.push(KvOp::Put(COUNT.to_vec(), count.to_be_bytes().to_vec()));
        self.kv.write(ops).map_err(self.backend("append"))?;
        Ok(added)
    }

    /// Make every reader's position outdated: the next number given lies above the horizon,
    /// so each stream lists its prefix once. For when events may have been lost (the queue
    /// was not read for longer than it keeps messages).
    pub fn outdate_positions(&self) -> Result<u64, StateError> {
        let _g = self.guard();
        let last = self.get_u64(LAST_SEQ)? + 1;
        self.kv
            .write(vec![
                KvOp::Put(LAST_SEQ.to_vec(), last.to_be_bytes().to_vec()),
                KvOp::Put(EXPIRED_THROUGH.to_vec(), last.to_be_bytes().to_vec()),
            ])
            .map_err(self.backend("write"))?;
        Ok(last)
    }

    /// Whether an event of this path and etag (or version) is held.
    pub fn contains(&self, e: &NewEvent) -> Result<bool, StateError> {
        Ok(self
            .kv
            .get(&identity_key(e))
            .map_err(self.backend("read"))?
            .is_some())
    }

    /// The held events of one path.
    pub fn events_of(&self, path: &str) -> Result<Vec<CachedEvent>, StateError> {
        let prefix = identity_prefix(path);
        let mut seqs = Vec::new();
        self.kv
            .scan(&prefix, &prefix, &mut |_, v| {
                if let Ok(b) = <[u8; 8]>::try_from(v) {
                    seqs.push(u64::from_be_bytes(b));
                }
                true
            })
            .map_err(self.backend("scan"))?;
        let mut out = Vec::new();
        for s in seqs {
            let k = event_key(s);
            if let Some(v) = self.kv.get(&k).map_err(self.backend("read"))? {
                out.push(self.decode(&k, &v)?);
            }
        }
        Ok(out)
    }

    /// Drop events (an object removed after it was created: streams that have not read its
    /// event yet must not admit a file that is gone). Not expiry: positions stay valid.
    pub fn remove(&self, events: &[CachedEvent]) -> Result<(), StateError> {
        if events.is_empty() {
            return Ok(());
        }
        let _g = self.guard();
        let mut count = self.get_u64(COUNT)?;
        let mut ops = Vec::new();
        for e in events {
            if self
                .kv
                .get(&event_key(e.seq))
                .map_err(self.backend("read"))?
                .is_some()
            {
                ops.push(KvOp::Delete(event_key(e.seq)));
                ops.push(KvOp::Delete(identity_key(&e.event)));
                count = count.saturating_sub(1);
            }
        }
        ops.push(KvOp::Put(COUNT.to_vec(), count.to_be_bytes().to_vec()));
        self.kv.write(ops).map_err(self.backend("remove"))
    }

    /// This cache's identity, made at its first use.
    pub fn id(&self) -> Result<String, StateError> {
        let _g = self.guard();
        if let Some(id) = self.kv.get(ID).map_err(self.backend("read"))? {
            return Ok(String::from_utf8_lossy(&id).into_owned());
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.kv
            .write(vec![KvOp::Put(ID.to_vec(), id.as_bytes().to_vec())])
            .map_err(self.backend("write"))?;
        Ok(id)
    }

    /// The last sequence number given (0: none yet).
    pub fn last_seq(&self) -> Result<u64, StateError> {
        self.get_u64(LAST_SEQ)
    }

    /// Sequence numbers at or below this were expired: a reader positioned below it may have
    /// missed events.
    pub fn expired_through(&self) -> Result<u64, StateError> {
        self.get_u64(EXPIRED_THROUGH)
    }

    /// Up to `limit` held events after position `after`, in order.
    pub fn read_after(&self, after: u64, limit: usize) -> Result<Vec<CachedEvent>, StateError> {
        let mut out = Vec::new();
        let mut bad = None;
        let from = event_key(after.saturating_add(1));
        self.kv
            .scan(b"e/", &from, &mut |k, v| {
                match self.decode(k, v) {
                    Ok(e) => out.push(e),
                    Err(e) => {
                        bad = Some(e);
                        return false;
                    }
                }
                out.len() < limit
            })
            .map_err(self.backend("scan"))?;
        match bad {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Remove events cached before `cutoff`, oldest first. Returns how many went.
    pub fn expire(&self, cutoff: DateTime<Utc>) -> Result<u64, StateError> {
        let mut total = 0;
        loop {
            let _g = self.guard();
            let mut gone = Vec::new();
            let mut bad = None;
            self.kv
                .scan(b"e/", b"e/", &mut |k, v| match self.decode(k, v) {
                    Ok(e) if e.cached < cutoff => {
                        gone.push(e);
                        gone.len() < EXPIRE_CHUNK
                    }
                    Ok(_) => false,
                    Err(e) => {
                        bad = Some(e);
                        false
                    }
                })
                .map_err(self.backend("scan"))?;
            if let Some(e) = bad {
                return Err(e);
            }
            let Some(last) = gone.last().map(|e| e.seq) else {
                return Ok(total);
            };
            let n = gone.len() as u64;
            let mut ops = Vec::with_capacity(gone.len() * 2 + 2);
            for e in &gone {
                ops.push(KvOp::Delete(event_key(e.seq)));
                ops.push(KvOp::Delete(identity_key(&e.event)));
            }
            let through = self.get_u64(EXPIRED_THROUGH)?.max(last);
            let count = self.get_u64(COUNT)?.saturating_sub(n);
            ops.push(KvOp::Put(
                EXPIRED_THROUGH.to_vec(),
                through.to_be_bytes().to_vec(),
            ));
            ops.push(KvOp::Put(COUNT.to_vec(), count.to_be_bytes().to_vec()));
            self.kv.write(ops).map_err(self.backend("expire"))?;
            total += n;
            if gone.len() < EXPIRE_CHUNK {
                return Ok(total);
            }
        }
    }

    /// Counts and the oldest and newest held event.
    pub fn stats(&self) -> Result<CacheStats, StateError> {
        let oldest = self.read_after(0, 1)?.pop().map(|e| e.cached);
        let last_seq = self.last_seq()?;
        let newest = self
            .read_after(last_seq.saturating_sub(1), 1)?
            .pop()
            .map(|e| e.cached)
            .or(oldest);
        Ok(CacheStats {
            events: self.get_u64(COUNT)?,
            last_seq,
            expired_through: self.expired_through()?,
            oldest,
            newest,
        })
    }

    /// A note of the consumer's (`m/user/<name>`).
    pub fn meta(&self, name: &str) -> Result<Option<String>, StateError> {
        let raw = self
            .kv
            .get(format!("m/user/{name}").as_bytes())
            .map_err(self.backend("read"))?;
        Ok(raw.map(|r| String::from_utf8_lossy(&r).into_owned()))
    }

    pub fn set_meta(&self, name: &str, value: &str) -> Result<(), StateError> {
        self.kv
            .write(vec![KvOp::Put(
                format!("m/user/{name}").into_bytes(),
                value.as_bytes().to_vec(),
            )])
            .map_err(self.backend("write"))
    }
}

/// Whether sequencer `a` orders after `b` (hexadecimal strings of varying length, compared
/// after padding the shorter with leading zeros).
pub fn seq_after(a: &str, b: &str) -> bool {
    let n = a.len().max(b.len());
    format!("{a:0>n$}") > format!("{b:0>n$}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::MemoryKv;

    fn ev(path: &str, etag: &str) -> NewEvent {
        NewEvent {
            path: path.into(),
            size: 10,
            etag: Some(format!("\"{etag}\"")),
            version: None,
            modified: Utc::now(),
            sequencer: None,
        }
    }

    #[test]
    fn one_event_per_path_and_etag_in_order() {
        let c = EventCache::new("l", MemoryKv::default());
        let now = Utc::now();
        assert_eq!(
            c.append(&[ev("a", "1"), ev("a", "1"), ev("b", "1")], now)
                .unwrap(),
            2
        );
        assert_eq!(c.append(&[ev("a", "1"), ev("a", "2")], now).unwrap(), 1);
        let all = c.read_after(0, 10).unwrap();
        let got: Vec<_> = all.iter().map(|e| (e.seq, e.event.path.as_str())).collect();
        assert_eq!(got, [(1, "a"), (2, "b"), (3, "a")]);
        assert_eq!(c.read_after(2, 10).unwrap().len(), 1);
        assert_eq!(c.read_after(0, 2).unwrap().len(), 2);
        assert_eq!(c.events_of("a").unwrap().len(), 2);
        assert_eq!(c.stats().unwrap().events, 3);
    }

    #[test]
    fn expiry_moves_the_horizon_and_frees_the_identity() {
        let c = EventCache::new("l", MemoryKv::default());
        let old = Utc::now() - chrono::Duration::days(8);
        c.append(&[ev("a", "1"), ev("b", "1")], old).unwrap();
        c.append(&[ev("c", "1")], Utc::now()).unwrap();
        assert_eq!(c.expire(Utc::now() - chrono::Duration::days(7)).unwrap(), 2);
        assert_eq!(c.expired_through().unwrap(), 2);
        assert_eq!(c.read_after(0, 10).unwrap()[0].seq, 3);
        // A later event of an expired identity is new again, under a new number.
        assert_eq!(c.append(&[ev("a", "1")], Utc::now()).unwrap(), 1);
        assert_eq!(c.last_seq().unwrap(), 4);
        let s = c.stats().unwrap();
        assert_eq!((s.events, s.expired_through), (2, 2));
    }

    #[test]
    fn a_duplicate_with_a_later_sequencer_moves_the_held_one() {
        let c = EventCache::new("l", MemoryKv::default());
        let with = |s: &str| NewEvent {
            sequencer: Some(s.into()),
            ..ev("a", "1")
        };
        // Inside one batch too: the first upload and the re-upload of the same bytes.
        let b = EventCache::new("l", MemoryKv::default());
        assert_eq!(b.append(&[with("01"), with("03")], Utc::now()).unwrap(), 1);
        assert_eq!(
            b.events_of("a").unwrap()[0].event.sequencer.as_deref(),
            Some("03")
        );
        c.append(&[with("01")], Utc::now()).unwrap();
        assert_eq!(c.append(&[with("03")], Utc::now()).unwrap(), 0);
        c.append(&[with("02")], Utc::now()).unwrap();
        let held = c.events_of("a").unwrap();
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].event.sequencer.as_deref(), Some("03"));
        // Outdating positions puts the horizon above every number given.
        let h = c.outdate_positions().unwrap();
        assert_eq!(
            (c.expired_through().unwrap(), c.last_seq().unwrap()),
            (h, h)
        );
        assert_eq!(c.append(&[ev("b", "1")], Utc::now()).unwrap(), 1);
        assert_eq!(c.last_seq().unwrap(), h + 1);
    }

    #[test]
    fn removal_drops_an_event_without_moving_the_horizon() {
        let c = EventCache::new("l", MemoryKv::default());
        c.append(&[ev("a", "1"), ev("b", "1")], Utc::now()).unwrap();
        let a = c.events_of("a").unwrap();
        c.remove(&a).unwrap();
        assert_eq!(c.read_after(0, 10).unwrap().len(), 1);
        assert_eq!(c.expired_through().unwrap(), 0);
        assert!(!c.contains(&ev("a", "1")).unwrap());
        assert_eq!(c.stats().unwrap().events, 1);
    }
}
