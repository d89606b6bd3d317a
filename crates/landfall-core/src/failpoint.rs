//! Crash injection for the exactly-once tests. `LANDFALL_FAILPOINTS="after_commit=0.3,after_plan=#2"`
//! aborts the process (like `kill -9`: no destructors, no flush) at a named point:
//!
//! - `name=P` (a number in 0..=1): at every hit, with probability `P`;
//! - `name=#N`: on the `N`th hit of that point in this process (1 = the first), exactly.
//!
//! `LANDFALL_FAILPOINT_SEED=<u64>` seeds the random numbers the probability form draws, so a
//! run is reproducible (given the same sequence of hits); without it the seed comes from the
//! clock and the process id. Unset in production; reading the variable costs one environment
//! lookup per point. No I/O beyond the one line `failpoint <name>: aborting (hit #N)` on stderr.
//!
//! Points, in protocol order: `after_plan`, `after_stage` (data files written, not committed),
//! `before_commit` (the attempt is recorded as reaching the commit call, which has not run),
//! `after_commit` (the table has the batch, the state does not), `after_record`; the Parquet
//! directory sink adds `after_manifest` (manifest written, staged files not yet published);
//! the Delta sink `after_type_change` (a column widened by its own commit, the batch that
//! needs it not yet written).
//! Notification discovery adds `after_receive` (messages received, files not recorded) and
//! `after_admit` (files recorded, messages not deleted). `before_inference`: a stream without
//! a schema has recorded its first files (and deleted their messages), inference has not run.
//! `after_entry_restored`: a notification stream found its bucket entry gone and wrote it
//! back, and has not listed the files published meanwhile.

use std::collections::HashMap;
use std::sync::Mutex;

/// When an armed failpoint fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// At every hit, with this probability.
    Probability(f64),
    /// On this hit exactly (1-based).
    Nth(u64),
}

/// The triggers `spec` (the `LANDFALL_FAILPOINTS` syntax) arms for point `name`. Malformed
/// items are ignored.
pub fn triggers(spec: &str, name: &str) -> Vec<Trigger> {
    spec.split(',')
        .filter_map(|item| {
            let (n, v) = item.split_once('=')?;
            if n.trim() != name {
                return None;
            }
            let v = v.trim();
            match v.strip_prefix('#') {
                Some(k) => k.trim().parse::<u64>().ok().map(Trigger::Nth),
                None => v.parse::<f64>().ok().map(Trigger::Probability),
            }
        })
        .collect()
}

/// Hit counts and the random state of this process.
struct Dice {
    rng: u64,
    hits: HashMap<String, u64>,
}

impl Dice {
    fn new(seed: u64) -> Self {
        // splitmix64 of the seed: any seed (0 included) gives a non-zero xorshift state.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Dice {
            rng: z | 1,
            hits: HashMap::new(),
        }
    }

    /// Uniform in [0, 1).
    fn next_random(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Count a hit of `name` and say whether one of `triggers` fires; the hit number too.
    fn roll(&mut self, name: &str, triggers: &[Trigger]) -> (bool, u64) {
        let n = self.hits.entry(name.to_string()).or_insert(0);
        *n += 1;
        let n = *n;
        let mut fire = false;
        for t in triggers {
            // Every probability trigger draws, fired or not, so the sequence of draws depends
            // on the sequence of hits only.
            fire |= match *t {
                Trigger::Nth(k) => n == k,
                Trigger::Probability(p) => self.next_random() < p,
            };
        }
        (fire, n)
    }
}

static DICE: Mutex<Option<Dice>> = Mutex::new(None);

fn seed_from_env() -> u64 {
    if let Some(s) = std::env::var("LANDFALL_FAILPOINT_SEED")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        return s;
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    t ^ ((std::process::id() as u64) << 32)
}

/// Abort here if the failpoint `name` is armed and fires at this hit.
pub fn hit(name: &str) {
    let Ok(spec) = std::env::var("LANDFALL_FAILPOINTS") else {
        return;
    };
    let armed = triggers(&spec, name);
    if armed.is_empty() {
        return;
    }
    let mut dice = DICE.lock().unwrap_or_else(|e| e.into_inner());
    let (fire, n) = dice
        .get_or_insert_with(|| Dice::new(seed_from_env()))
        .roll(name, &armed);
    if fire {
        // `LANDFALL_FAILPOINT_ACTION=panic`: unwind instead (tests of the supervisor's panic
        // handling); the default is an abort, like `kill -9`.
        if std::env::var("LANDFALL_FAILPOINT_ACTION").as_deref() == Ok("panic") {
            panic!("failpoint {name}: panicking (hit #{n})");
        }
        eprintln!("failpoint {name}: aborting (hit #{n})");
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms_and_ignores_the_rest() {
        let spec =
            "after_plan=0.25, after_commit=#3,after_plan=#1,bogus,after_stage=x,after_record=#";
        assert_eq!(
            triggers(spec, "after_plan"),
            vec![Trigger::Probability(0.25), Trigger::Nth(1)]
        );
        assert_eq!(triggers(spec, "after_commit"), vec![Trigger::Nth(3)]);
        assert!(triggers(spec, "after_stage").is_empty());
        assert!(triggers(spec, "after_record").is_empty());
        assert!(triggers("", "after_plan").is_empty());
    }

    #[test]
    fn nth_fires_on_that_hit_only() {
        let mut d = Dice::new(7);
        let t = [Trigger::Nth(3)];
        let fired: Vec<bool> = (0..6).map(|_| d.roll("p", &t).0).collect();
        assert_eq!(fired, [false, false, true, false, false, false]);
        // Counts are per point.
        assert_eq!(d.roll("q", &t), (false, 1));
    }

    #[test]
    fn a_seed_gives_the_same_sequence() {
        let draw = |seed| {
            let mut d = Dice::new(seed);
            let t = [Trigger::Probability(0.3)];
            (0..200).map(|_| d.roll("p", &t).0).collect::<Vec<_>>()
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
        let fired = draw(0).iter().filter(|f| **f).count();
        assert!((30..90).contains(&fired), "{fired} of 200 at p = 0.3");
        // Probability 0 and 1 are exact.
        let mut d = Dice::new(1);
        assert!((0..100).all(|_| !d.roll("p", &[Trigger::Probability(0.0)]).0));
        assert!((0..100).all(|_| d.roll("p", &[Trigger::Probability(1.0)]).0));
    }
}
