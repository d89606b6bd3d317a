//! The fuzz targets in the test suite, on the stable toolchain: every input kept in
//! `fuzz/corpus/<target>/` (the seeds and what coverage-guided runs found), then a fixed number
//! of mutations of them (bit flips, byte changes, cuts, repeats, splices of two inputs), from a
//! fixed seed so a failure replays. A failing input is written to `target/fuzz-smoke/` and
//! named in the message; `cargo fuzz run <target> <file>` replays it under the fuzzer.
//!
//! `LANDFALL_FUZZ_SMOKE_MUTATIONS` sets the mutations per target (default 2,000).
#![cfg(feature = "services")]

use std::path::{Path, PathBuf};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("corpus file reads"))
        })
        .collect();
    out.sort();
    out
}

/// xorshift64*: the mutations are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: &[&[u8]] = &[
    b"\x00",
    b"\xff",
    b"\n",
    b"\r\n",
    b"\"",
    b"'",
    b",",
    b"{",
    b"}",
    b"[",
    b"]",
    b"<",
    b">",
    b"\\",
    b"\\u",
    b"-1",
    b"99999999999999999999",
    b"1e999",
    b"NaN",
    b"\xef\xbb\xbf",
    b"\xc3",
    b"${",
    b"`",
    b"%",
    b"%FF",
    b"&amp;",
    b"<!--",
    b"]]>",
];

fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = rng.next() as u8;
            }
            2 => v.truncate(rng.below(len + 1)),
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                let piece = v[a..b].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, piece);
            }
            4 => {
                let piece = INTERESTING[rng.below(INTERESTING.len())];
                let at = rng.below(len + 1);
                v.splice(at..at, piece.iter().copied());
            }
            5 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(32)).min(len);
                v.drain(a..b);
            }
            _ => {
                let at = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
        }
    }
    v
}

fn keep_failing(target: &str, name: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/fuzz-smoke")
        .join(target);
    std::fs::create_dir_all(&dir).expect("failure dir");
    let path = dir.join(name);
    std::fs::write(&path, input).expect("failing input written");
    path
}

fn run_one(target: &str, f: fn(&[u8]), name: &str, input: &[u8]) {
    if std::panic::catch_unwind(|| f(input)).is_err() {
        let kept = keep_failing(target, name, input);
        panic!(
            "fuzz target {target} fails on {name} (kept at {})",
            kept.display()
        );
    }
}

fn smoke(target: &str) {
    let f = landfall_fuzz::TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .unwrap_or_else(|| panic!("no target {target}"))
        .1;
    let inputs = corpus(target);
    assert!(!inputs.is_empty(), "fuzz/corpus/{target} is empty");
    for (name, input) in &inputs {
        run_one(target, f, name, input);
    }
    let n: usize = std::env::var("LANDFALL_FUZZ_SMOKE_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut rng = Rng(0x6c61_6e64_6661_6c6c ^ target.len() as u64);
    for i in 0..n {
        let (_, a) = &inputs[rng.below(inputs.len())];
        let (_, b) = &inputs[rng.below(inputs.len())];
        let m = mutate(&mut rng, a, b);
        run_one(target, f, &format!("mutation-{i}"), &m);
    }
}

#[test]
fn every_target_has_a_corpus_and_a_smoke_test() {
    let dirs: Vec<String> = std::fs::read_dir(corpus_dir(""))
        .expect("fuzz/corpus")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for (name, _) in landfall_fuzz::TARGETS {
        assert!(dirs.contains(&name.to_string()), "no fuzz/corpus/{name}");
        let target = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/fuzz_targets")
            .join(format!("{name}.rs"));
        assert!(target.exists(), "no {}", target.display());
    }
    assert_eq!(
        dirs.len(),
        landfall_fuzz::TARGETS.len(),
        "a corpus without a target: {dirs:?}"
    );
}

macro_rules! smoke_tests {
    ($($t:ident),*) => {$(
        #[test]
        fn $t() {
            smoke(stringify!($t));
        }
    )*};
}

smoke_tests!(
    decode,
    decode_orc,
    infer,
    messages,
    ddl,
    config,
    delta_log,
    listing_page
);
