//! Incremental listing: which listing rounds list the whole prefix and which list only the
//! keys after the discovery cursor, as Auto Loader's `useIncrementalListing` does.
//!
//! The cursor is the greatest key (object path) of the files listings have passed to the
//! ledger; it is stored with the files it admitted, in the same write, and only moves
//! forward. A listing is either
//!
//! - **full**: the whole prefix (S3 ListObjectsV2 without `start-after`, object_store's
//!   `list`), every page checked against the ledger; or
//! - **incremental**: only keys after the cursor (S3 and GCS `start-after=<cursor>`, Azure
//!   `startFrom=<cursor>` where the service honours it, with the cursor filtered on the client
//!   as well; local directories and stores left to object_store filter on the client, so the
//!   saving there is in ledger lookups, not in requests). On a lexically ordered S3 prefix with
//!   few new keys this is one LIST request, whatever the size of the prefix.
//!
//! Which one a round does (`incremental_listing`, `full_listing_interval` = N, default 7):
//!
//! - Full, whatever the mode: the first listing after every start (the cursor may be stale: a
//!   changed source prefix, glob or filter), a listing an operator asked for (`backfill`), and
//!   any listing without a cursor under the source prefix.
//! - `off`: always full.
//! - `on`: incremental, except that after N incremental listings the next one is full. Files
//!   that sort before the cursor (a non-lexical layout, an upload that finished out of order, an
//!   empty object that got content) are found by that full listing, up to N rounds late; never
//!   lost. A full listing that finds such files logs a warning.
//! - `auto` (default): decides from the keys full listings find new (unknown to the ledger),
//!   compared with the cursor the listing started from. Listings are full until a full listing
//!   finds new files that all sort after that cursor (date-prefixed paths, zero-padded sequence
//!   numbers): from then on it behaves as `on`. A full listing that finds a new file at or
//!   before its cursor (a file an incremental listing would have missed) switches auto back to
//!   full listings for the rest of the run: the layout is not lexical, or files complete out of
//!   order. Full listings that find nothing new change nothing. The verdict is kept in memory:
//!   after a restart auto starts over with full listings.
//!
//! Auto never makes a file later than a full listing would, except between the first
//! out-of-order file and the full listing that finds it (at most N rounds), which is what
//! switches it off.

use landfall_core::IncrementalListing;

/// How one listing round lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListingKind {
    /// The whole prefix.
    Full,
    /// Only keys after the cursor.
    Incremental,
}

/// What `auto` has learnt of the layout in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// No full listing has found new files after a cursor yet: listings stay full.
    Unknown,
    /// Full listings found new files, all after the cursor they started from.
    Lexical,
    /// A full listing found a new file at or before its cursor: full listings from then on.
    NotLexical,
}

/// What a full listing that started from a cursor found new, for `auto`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FullListingOutcome {
    /// New files sorting after the cursor the listing started from.
    pub new_after: u64,
    /// New files at or before it: an incremental listing would not have seen them.
    pub new_before: u64,
    /// The first of those, for the log.
    pub first_before: Option<String>,
}

/// The rule above, as a state machine with no I/O: [`ListingPolicy::next`] tells how the next
/// round lists, [`ListingPolicy::incremental_done`] and [`ListingPolicy::full_done`] record
/// what a round did.
#[derive(Debug, Clone)]
pub struct ListingPolicy {
    mode: IncrementalListing,
    interval: u32,
    /// Incremental listings since the last full one; `None` before this run's first full
    /// listing.
    since_full: Option<u32>,
    layout: Layout,
    /// An operator asked for a full listing.
    full_asked: bool,
}

impl ListingPolicy {
    /// `interval`: incremental listings between two full ones (0 is taken as 1).
    pub fn new(mode: IncrementalListing, interval: u32) -> Self {
        ListingPolicy {
            mode,
            interval: interval.max(1),
            since_full: None,
            layout: Layout::Unknown,
            full_asked: false,
        }
    }

    pub fn mode(&self) -> IncrementalListing {
        self.mode
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// How the next round lists; `has_cursor`: a cursor under the source prefix is stored.
    pub fn next(&self, has_cursor: bool) -> ListingKind {
        let due = match self.since_full {
            None => true,
            Some(n) => n >= self.interval,
        };
        let incremental = match self.mode {
            IncrementalListing::Off => false,
            IncrementalListing::On => true,
            IncrementalListing::Auto => self.layout == Layout::Lexical,
        };
        if incremental && has_cursor && !due && !self.full_asked {
            ListingKind::Incremental
        } else {
            ListingKind::Full
        }
    }

    /// Make the next listing a full one.
    pub fn ask_full(&mut self) {
        self.full_asked = true;
    }

    /// An incremental listing completed.
    pub fn incremental_done(&mut self) {
        self.since_full = Some(self.since_full.map_or(1, |n| n.saturating_add(1)));
    }

    /// A full listing completed; `outcome` is what it found new relative to the cursor it
    /// started from (`None`: it had no cursor, or did not ask the ledger what is new). Returns
    /// the new layout when this listing changed `auto`'s verdict.
    pub fn full_done(&mut self, outcome: Option<&FullListingOutcome>) -> Option<Layout> {
        self.since_full = Some(0);
        self.full_asked = false;
        let o = outcome?;
        if self.mode != IncrementalListing::Auto || self.layout == Layout::NotLexical {
            return None;
        }
        let layout = if o.new_before > 0 {
            Layout::NotLexical
        } else if o.new_after > 0 {
            Layout::Lexical
        } else {
            self.layout
        };
        (layout != self.layout).then(|| {
            self.layout = layout;
            layout
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use IncrementalListing::{Auto, Off, On};
    use ListingKind::{Full, Incremental};

    fn found(new_after: u64, new_before: u64) -> FullListingOutcome {
        FullListingOutcome {
            new_after,
            new_before,
            first_before: (new_before > 0).then(|| "in/a.json".to_string()),
        }
    }

    /// Run rounds where every full listing finds `outcome`; the kinds listed.
    fn rounds(p: &mut ListingPolicy, n: usize, outcome: &FullListingOutcome) -> Vec<ListingKind> {
        (0..n)
            .map(|_| {
                let kind = p.next(true);
                match kind {
                    Full => {
                        p.full_done(Some(outcome));
                    }
                    Incremental => p.incremental_done(),
                }
                kind
            })
            .collect()
    }

    #[test]
    fn off_always_lists_in_full() {
        let mut p = ListingPolicy::new(Off, 7);
        assert!(rounds(&mut p, 20, &found(5, 0)).iter().all(|k| *k == Full));
    }

    #[test]
    fn on_lists_in_full_at_start_and_every_interval() {
        let mut p = ListingPolicy::new(On, 3);
        assert_eq!(
            rounds(&mut p, 9, &found(0, 2)),
            [
                Full,
                Incremental,
                Incremental,
                Incremental,
                Full,
                Incremental,
                Incremental,
                Incremental,
                Full
            ]
        );
        // New files before the cursor do not switch `on` off.
        assert_eq!(p.layout(), Layout::Unknown);
    }

    #[test]
    fn the_default_interval_is_seven_incremental_listings() {
        let mut p = ListingPolicy::new(On, 7);
        let kinds = rounds(&mut p, 17, &found(1, 0));
        let full: Vec<usize> = (0..17).filter(|i| kinds[*i] == Full).collect();
        assert_eq!(full, [0, 8, 16]);
    }

    #[test]
    fn no_cursor_or_a_requested_backfill_lists_in_full() {
        let mut p = ListingPolicy::new(On, 7);
        assert_eq!(p.next(true), Full, "the first listing of a run");
        p.full_done(None);
        assert_eq!(p.next(true), Incremental);
        assert_eq!(p.next(false), Full, "no cursor under the prefix");
        p.incremental_done();
        p.ask_full();
        assert_eq!(p.next(true), Full);
        p.full_done(None);
        assert_eq!(p.next(true), Incremental, "the request is served once");
    }

    #[test]
    fn auto_waits_for_evidence_of_lexical_order() {
        let mut p = ListingPolicy::new(Auto, 7);
        // Nothing new, or no cursor to compare with: no evidence, listings stay full.
        assert_eq!(p.next(true), Full);
        assert_eq!(p.full_done(None), None);
        assert_eq!(p.next(true), Full);
        assert_eq!(p.full_done(Some(&found(0, 0))), None);
        assert_eq!(p.next(true), Full);
        // New files, all after the cursor: lexical, incremental from the next round.
        assert_eq!(p.full_done(Some(&found(3, 0))), Some(Layout::Lexical));
        assert_eq!(
            rounds(&mut p, 9, &found(2, 0)),
            [
                Incremental,
                Incremental,
                Incremental,
                Incremental,
                Incremental,
                Incremental,
                Incremental,
                Full,
                Incremental
            ]
        );
        assert_eq!(p.layout(), Layout::Lexical);
    }

    #[test]
    fn auto_switches_back_to_full_listings_for_good_on_a_file_before_the_cursor() {
        let mut p = ListingPolicy::new(Auto, 2);
        assert_eq!(p.next(true), Full);
        assert_eq!(p.full_done(Some(&found(1, 0))), Some(Layout::Lexical));
        assert_eq!(rounds(&mut p, 2, &found(1, 0)), [Incremental, Incremental]);
        // The forced full listing finds a file an incremental listing missed.
        assert_eq!(p.next(true), Full);
        assert_eq!(p.full_done(Some(&found(4, 1))), Some(Layout::NotLexical));
        // From then on every listing is full, even when later ones look lexical again.
        assert!(rounds(&mut p, 10, &found(5, 0)).iter().all(|k| *k == Full));
        assert_eq!(p.layout(), Layout::NotLexical);
    }

    #[test]
    fn auto_never_goes_incremental_on_a_layout_that_is_not_lexical() {
        let mut p = ListingPolicy::new(Auto, 7);
        // The first full listing with new files finds one before the cursor.
        assert_eq!(p.next(true), Full);
        assert_eq!(p.full_done(Some(&found(2, 1))), Some(Layout::NotLexical));
        assert!(rounds(&mut p, 10, &found(1, 0)).iter().all(|k| *k == Full));
    }

    #[test]
    fn a_restart_starts_over() {
        let mut p = ListingPolicy::new(Auto, 7);
        p.full_done(Some(&found(1, 0)));
        assert_eq!(p.next(true), Incremental);
        let p = ListingPolicy::new(Auto, 7);
        assert_eq!(p.next(true), Full);
        assert_eq!(p.layout(), Layout::Unknown);
    }
}
