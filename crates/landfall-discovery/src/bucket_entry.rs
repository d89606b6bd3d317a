//! The owner's entry in a bucket's notification configuration, written so that it survives
//! other writers.
//!
//! S3 keeps one notification configuration per bucket, read and written whole
//! (Get/PutBucketNotificationConfiguration) with no condition: two writers that read the same
//! configuration each write back their own version, and the second drops the first's entry;
//! an outside blind write (Terraform, the console) drops it too, and nothing tells the loser,
//! whose stream then waits for events forever. So:
//! - after writing, the configuration is read back (after a short jittered pause, so a racing
//!   writer's write has landed) and the entry checked: same id, same queue or topic, created
//!   and removed events, the same prefix rule. A missing or different entry is written again
//!   after a jittered, doubling backoff, up to [`WRITE_ATTEMPTS`] times, then the setup fails
//!   (retryable) naming the bucket and the entry;
//!   The pause before the read-back is at least twice as long as the write took (S3 checks
//!   each destination while it writes, so a racing write may land a second later), and the
//!   guard checks again [`FIRST_RECHECK`] after its first check, before the longer interval;
//! - at every start and every `verify_interval` the entry is checked again ([`EntryGuard`]);
//!   one found gone is written again, logged and counted, and the owner lists its prefix
//!   once, so the files published while it was gone are found. That listing is owed
//!   durably: the owner records the debt ([`OwedListing`]) before the entry is
//!   written back and clears it only once a listing that started after it has been recorded,
//!   so a crash, a stop or a failed listing in between lists again at the next start;
//! - every check is reported ([`EntryHooks::checked`]): a check that cannot run (access
//!   denied, an outage, a write S3 refuses) is logged, counted and shown in the owner's
//!   status until a check succeeds, since the owner may be waiting for events that no longer
//!   come.
//!
//! The prefix rule ([`rule_prefix`]): S3 compares a filter value with the key in the form it
//! encodes keys in event messages (AWS documents a space as `+` and other special characters
//! percent-encoded in filter values), which S3-compatible servers do not all share (moto
//! compares the raw key). Only the characters S3's key naming guidelines call safe mean the
//! same either way, so the rule is the decoded key prefix cut before the first other
//! character: for `landing zone/é/` it is `landing`. The rule may select more keys than the
//! stream's prefix; the stream passes over events outside its prefix itself (counted).

use crate::aws_notify::{AwsNotifications, Entry, SetupError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many times an entry is written before setup gives up (a writer racing on every try).
pub const WRITE_ATTEMPTS: u32 = 8;
/// The first pause before reading an entry back, and between attempts (doubled each time,
/// jittered by up to half again).
const FIRST_PAUSE: Duration = Duration::from_millis(150);
const MAX_PAUSE: Duration = Duration::from_secs(5);
/// A check that failed is tried again this soon (not a whole interval later).
pub const RETRY_FAILED_CHECK: Duration = Duration::from_secs(30);
/// The second check comes this soon after the first (or the interval, when shorter): a
/// writer racing the setup is caught early.
pub const FIRST_RECHECK: Duration = Duration::from_secs(30);

/// `d` plus up to half again, from the clock and the process id (no shared state: two
/// processes racing draw different pauses).
fn jittered(d: Duration) -> Duration {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos() as u64)
        ^ ((std::process::id() as u64) << 20);
    // SplitMix64 finaliser: spreads the bits of the seed.
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    d + d.mul_f64((z % 1000) as f64 / 2000.0)
}

/// What a check of the entry found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryCheck {
    /// The entry is there as written.
    Present,
    /// It was gone (or changed) and is written again: list once.
    Restored,
}

impl AwsNotifications {
    /// Write `e` into `bucket`'s configuration, everyone else's entries kept, until a read
    /// back shows it (see the module doc).
    pub(crate) async fn write_entry(&self, bucket: &str, e: &Entry) -> Result<(), SetupError> {
        let mut pause = FIRST_PAUSE;
        for _ in 0..WRITE_ATTEMPTS {
            let current = self.bucket_configuration(bucket).await?;
            let mut wait = pause;
            if !current.holds(e) {
                let t = Instant::now();
                self.put_configuration(bucket, current.with(e, bucket)?)
                    .await?;
                // A racing writer's PUT takes about as long as ours: let it land first.
                wait = wait.max(t.elapsed() * 2);
            }
            tokio::time::sleep(jittered(wait)).await;
            if self.bucket_configuration(bucket).await?.holds(e) {
                return Ok(());
            }
            tracing::warn!(bucket, entry = %e.id, "the bucket notification entry was overwritten by another writer; writing it again");
            pause = (pause * 2).min(MAX_PAUSE);
        }
        Err(SetupError::Aws {
            op: "PutBucketNotificationConfiguration",
            resource: bucket.to_string(),
            detail: format!(
                "entry `{}` was overwritten by another writer on each of {WRITE_ATTEMPTS} tries (who else writes this bucket's notification configuration?)",
                e.id
            ),
        })
    }

    /// Whether `e` is in `bucket`'s configuration; written again when it is not, once
    /// `before_restore` (which records the listing owed) succeeded.
    pub async fn check_entry(
        &self,
        bucket: &str,
        e: &Entry,
        before_restore: impl FnOnce() -> Result<(), String>,
    ) -> Result<EntryCheck, SetupError> {
        if self.bucket_configuration(bucket).await?.holds(e) {
            return Ok(EntryCheck::Present);
        }
        before_restore().map_err(|detail| SetupError::Aws {
            op: "PutBucketNotificationConfiguration",
            resource: bucket.to_string(),
            detail: format!(
                "entry `{}` is gone, and the listing it makes owed could not be recorded, so it is not written back yet: {detail}",
                e.id
            ),
        })?;
        self.write_entry(bucket, e).await?;
        Ok(EntryCheck::Restored)
    }
}

/// How an owner keeps, in its own state (a stream's ledger, a location's cache), the listing
/// that writing its bucket entry back makes owed: recorded before the entry is written, and
/// cleared by the owner once a later listing is recorded.
#[derive(Clone)]
pub struct OwedListing {
    /// Record that a listing is owed.
    pub owe: Arc<dyn Fn() -> Result<(), String> + Send + Sync>,
    /// Whether a listing is owed (recorded and not paid yet).
    pub owed: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// What the owner of an entry does around its checks.
#[derive(Clone)]
pub struct EntryHooks {
    pub owed: OwedListing,
    /// Every check's result, with the owner, the bucket and the entry (logs, counts, status).
    pub checked: OnCheck,
}

/// Called with the owner, the bucket, the entry and what a check found.
pub type OnCheck = Arc<dyn Fn(&str, &str, &Entry, Result<EntryCheck, &SetupError>) + Send + Sync>;

/// Checks an owner's bucket entry at its first round and every `every` after, writing it
/// again when it is gone (see the module doc).
pub struct EntryGuard {
    owner: String,
    aws: AwsNotifications,
    bucket: String,
    entry: Entry,
    every: Duration,
    /// When the next check is due (`None`: at the next round), and whether one succeeded.
    next: Mutex<(Option<Instant>, bool)>,
    hooks: EntryHooks,
    /// Why the last check failed, while it did (shown in the owner's status): the entry may
    /// be missing, see [`EntryGuard::unsettled`].
    problem: Mutex<Option<String>>,
}

impl EntryGuard {
    pub fn new(
        owner: &str,
        aws: AwsNotifications,
        bucket: &str,
        entry: Entry,
        every: Duration,
        hooks: EntryHooks,
    ) -> Self {
        EntryGuard {
            owner: owner.to_string(),
            aws,
            bucket: bucket.to_string(),
            entry,
            every,
            next: Mutex::new((None, false)),
            hooks,
            problem: Mutex::new(None),
        }
    }

    /// Why the last check failed, while it did: for the owner's status.
    pub fn problem(&self) -> Option<String> {
        self.problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Check the entry when due. `Ok(true)`: the owner must list once (the entry was gone and
    /// is written again, or a listing is owed since an earlier check or run). A failed check
    /// (denied, an outage) is due again after [`RETRY_FAILED_CHECK`] (or the interval, when
    /// shorter).
    pub async fn check_if_due(&self) -> Result<bool, SetupError> {
        let due = {
            let next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            next.0.is_none_or(|at| Instant::now() >= at)
        };
        if !due {
            return Ok(false);
        }
        let found = self
            .aws
            .check_entry(&self.bucket, &self.entry, || (self.hooks.owed.owe)())
            .await;
        {
            // The check after the first that succeeds comes sooner.
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let after = match (&found, next.1) {
                (Err(_), _) => self.every.min(RETRY_FAILED_CHECK),
                (Ok(_), false) => self.every.min(FIRST_RECHECK),
                (Ok(_), true) => self.every,
            };
            *next = (Some(Instant::now() + after), next.1 || found.is_ok());
        }
        // A failed check leaves the entry unsettled: it may be gone, and nothing can tell
        // since when.
        let was_unsettled = std::mem::replace(
            &mut *self.problem.lock().unwrap_or_else(|e| e.into_inner()),
            found.as_ref().err().map(|e| e.to_string()),
        )
        .is_some();
        (self.hooks.checked)(
            &self.owner,
            &self.bucket,
            &self.entry,
            found.as_ref().copied(),
        );
        // In place now. A listing is owed when the entry was gone, when checks failed since
        // the last one that saw it (it may have been gone meanwhile), or when an earlier run
        // recorded the debt and did not pay it (stopped, crashed, its listing failed; asked
        // again at every check until it is paid). The debt is recorded again now, so only a
        // listing that starts after the entry is known to be in place pays it.
        let owed = found? == EntryCheck::Restored || was_unsettled || (self.hooks.owed.owed)();
        if owed && let Err(e) = (self.hooks.owed.owe)() {
            tracing::warn!(owner = %self.owner, bucket = %self.bucket, error = %e, "could not record the listing owed again; listing now");
        }
        Ok(owed)
    }

    /// Whether the entry may be missing as far as this process knows (a check failed, and
    /// none has seen it in place since): a listing now does not pay the listing owed.
    pub fn unsettled(&self) -> bool {
        self.problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The bucket the entry is in.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws_notify::rule_prefix;

    #[test]
    fn the_rule_stops_before_the_first_unsafe_character() {
        assert_eq!(rule_prefix("landing/x/"), "landing/x/");
        assert_eq!(rule_prefix("landing zone/é/"), "landing");
        assert_eq!(rule_prefix("é/"), "");
        assert_eq!(rule_prefix("a-b_c.d!e'f(g)/h/"), "a-b_c.d!e'f(g)/h/");
        assert_eq!(rule_prefix("events/date=2024-01-01/"), "events/date");
        assert_eq!(rule_prefix("a+b/"), "a");
        assert_eq!(rule_prefix("a*b/"), "a");
        assert_eq!(rule_prefix(""), "");
    }

    #[test]
    fn jitter_stays_within_half_again() {
        for _ in 0..100 {
            let d = jittered(Duration::from_millis(100));
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(150));
        }
    }
}
