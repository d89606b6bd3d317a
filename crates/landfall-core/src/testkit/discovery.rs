//! A discovery that plays a script, as a queue delivers messages: each round yields the next
//! scripted files and acknowledgement tokens (the same file may come again, as a redelivered
//! message does), and once the script is played a round receives nothing and says the source
//! has no more, as an empty receive does. A round may also be a full listing. It keeps what
//! it was told (the memory's mode at `prepare`, the rounds admitted, the tokens acknowledged),
//! and, given the stream's ledger, checks at each acknowledgement that the files of the round
//! those tokens came with are admitted: a message deleted before its file is durably known is
//! a file lost. Files modified at or before `RunStart::modified_after` are left out, as
//! every discovery leaves them out.

use crate::file::FileMeta;
use crate::seams::{
    AckToken, Discovery, DiscoveryBatch, DiscoveryMemory, QueueRound, RecordedMode, RunStart,
    SeamError, SeamResult, StateStore,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// One scripted round: the files it yields and the tokens of the messages that named them,
/// or a full listing (no tokens).
#[derive(Debug, Clone, Default)]
pub struct ScriptedRound {
    pub files: Vec<FileMeta>,
    pub ack: Vec<AckToken>,
    pub full_listing: bool,
}

/// What the worker did with the script, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptEvent {
    /// `prepare`, with the mode the memory held and what the run said.
    Prepared(Option<RecordedMode>, RunStart),
    /// A round was handed out (its number, from 0).
    Discovered(usize),
    /// `round_admitted` after a round's files were admitted (whether it was a full listing).
    Admitted { full_listing: bool },
    /// `acknowledge` with these tokens.
    Acknowledged(Vec<AckToken>),
    /// `acknowledge` came while these files of the round were unknown to the ledger: their
    /// messages would be deleted before the files are durably admitted.
    AcknowledgedUnadmitted(Vec<String>),
    /// `request_full_listing`.
    FullListingAsked,
}

/// After this many endless rounds the script panics: a run that ignores its drain budget
/// would otherwise discover for ever.
const ENDLESS_LIMIT: usize = 10_000;

#[derive(Default)]
struct Script {
    rounds: VecDeque<ScriptedRound>,
    handed_out: usize,
    /// Rounds handed out whose messages are not acknowledged yet (checked against the ledger
    /// when their tokens are acknowledged, and delivered again when that fails).
    unacknowledged: Vec<ScriptedRound>,
    /// Files modified at or before this are not candidates (`RunStart::modified_after`).
    modified_after: Option<DateTime<Utc>>,
    /// After the script: rounds of one message each that name no file, without end (a
    /// producer faster than the run), instead of empty rounds.
    endless: bool,
    drain_budget: Option<u64>,
    fail_next: Option<SeamError>,
    fail_acknowledge: Option<SeamError>,
    ledger: Option<(Arc<dyn StateStore>, bool)>,
    events: Vec<ScriptEvent>,
}

/// A [`Discovery`] over a script of rounds. Clones share the script. It long-polls, as a
/// queue does.
#[derive(Clone, Default)]
pub struct ScriptedDiscovery {
    script: Arc<Mutex<Script>>,
}

impl ScriptedDiscovery {
    pub fn new() -> Self {
        Self::default()
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Check at each acknowledgement that the round's files are in `ledger` (under the key
    /// `allow_overwrites` gives them).
    pub fn with_ledger(self, ledger: Arc<dyn StateStore>, allow_overwrites: bool) -> Self {
        self.script().ledger = Some((ledger, allow_overwrites));
        self
    }

    /// Add a round of queue messages to the script.
    pub fn push_round(&self, files: Vec<FileMeta>, ack: &[&str]) {
        let ack = ack.iter().map(|a| AckToken(a.to_string())).collect();
        self.script().rounds.push_back(ScriptedRound {
            files,
            ack,
            full_listing: false,
        });
    }

    /// Add a full listing of the source to the script.
    pub fn push_listing(&self, files: Vec<FileMeta>) {
        self.script().rounds.push_back(ScriptedRound {
            files,
            ack: Vec::new(),
            full_listing: true,
        });
    }

    /// After the scripted rounds, keep saying the source has more (one message a round, no
    /// file), and tell an available-now run this budget.
    pub fn endless(&self, drain_budget: Option<u64>) {
        let mut s = self.script();
        s.endless = true;
        s.drain_budget = drain_budget;
    }

    /// Fail the next `discover` with `e` (the round stays in the script).
    pub fn fail_next(&self, e: SeamError) {
        self.script().fail_next = Some(e);
    }

    /// Fail the next `acknowledge` with `e`: its messages were not deleted, so its round is
    /// delivered again (as after a visibility timeout).
    pub fn fail_next_acknowledge(&self, e: SeamError) {
        self.script().fail_acknowledge = Some(e);
    }

    /// What the worker did with the script, in order.
    pub fn events(&self) -> Vec<ScriptEvent> {
        self.script().events.clone()
    }

    /// Every token acknowledged, in order.
    pub fn acknowledged(&self) -> Vec<AckToken> {
        self.script()
            .events
            .iter()
            .filter_map(|e| match e {
                ScriptEvent::Acknowledged(t) => Some(t.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Rounds handed out so far.
    pub fn rounds_taken(&self) -> usize {
        self.script().handed_out
    }
}

#[async_trait]
impl Discovery for ScriptedDiscovery {
    fn prepare(&mut self, memory: &dyn DiscoveryMemory, run: RunStart) -> SeamResult<()> {
        let mode = memory.mode()?;
        let mut s = self.script();
        s.modified_after = run.modified_after;
        s.events.push(ScriptEvent::Prepared(mode, run));
        Ok(())
    }

    async fn discover(&self, _cursor: Option<&str>) -> SeamResult<DiscoveryBatch> {
        // A receive is a network call: give the runtime a turn, so a run that never stops
        // discovering is still stopped by a test's timeout.
        yield_now().await;
        let mut s = self.script();
        if let Some(e) = s.fail_next.take() {
            return Err(e);
        }
        let mut round = match s.rounds.pop_front() {
            Some(r) => r,
            None if s.endless => {
                assert!(
                    s.handed_out < ENDLESS_LIMIT,
                    "{ENDLESS_LIMIT} rounds: the run does not stop discovering"
                );
                ScriptedRound {
                    ack: vec![AckToken(format!("endless-{}", s.handed_out))],
                    ..ScriptedRound::default()
                }
            }
            None => ScriptedRound::default(),
        };
        let n = s.handed_out;
        s.handed_out += 1;
        s.events.push(ScriptEvent::Discovered(n));
        if !round.ack.is_empty() {
            s.unacknowledged.push(round.clone());
        }
        if let Some(cutoff) = s.modified_after {
            round.files.retain(|f| f.modified > cutoff);
        }
        let received = round.ack.len() as u64;
        Ok(DiscoveryBatch {
            listed: received.max(round.files.len() as u64),
            full_listing: round.full_listing,
            // As a queue says: a receive that got messages may have left more behind; an
            // empty one says the queue is drained. A listing is followed by a receive.
            more: received > 0 || round.full_listing,
            queue: (!round.full_listing).then(|| QueueRound {
                received,
                ..QueueRound::default()
            }),
            files: round.files,
            ack: round.ack,
            ..DiscoveryBatch::default()
        })
    }

    fn round_admitted(
        &self,
        _memory: &dyn DiscoveryMemory,
        full_listing: bool,
        _started: DateTime<Utc>,
    ) -> SeamResult<()> {
        self.script()
            .events
            .push(ScriptEvent::Admitted { full_listing });
        Ok(())
    }

    async fn acknowledge(&self, tokens: Vec<AckToken>) -> SeamResult<()> {
        if tokens.is_empty() {
            return Ok(());
        }
        let mut s = self.script();
        // The round these tokens came with (a worker acknowledges a round's tokens together).
        let round = match s.unacknowledged.iter().position(|r| r.ack == tokens) {
            Some(i) => s.unacknowledged.remove(i),
            None => panic!("acknowledged tokens no round handed out: {tokens:?}"),
        };
        if let Some((ledger, overwrites)) = &s.ledger {
            let cutoff = s.modified_after;
            let mut unknown = Vec::new();
            for f in &round.files {
                let candidate = cutoff.is_none_or(|c| f.modified > c);
                if candidate && ledger.file(&f.key(*overwrites))?.is_none() {
                    unknown.push(f.path.clone());
                }
            }
            if !unknown.is_empty() {
                s.events.push(ScriptEvent::AcknowledgedUnadmitted(unknown));
            }
        }
        if let Some(e) = s.fail_acknowledge.take() {
            s.rounds.push_front(round);
            return Err(e);
        }
        s.events.push(ScriptEvent::Acknowledged(tokens));
        Ok(())
    }

    fn request_full_listing(&self) {
        self.script().events.push(ScriptEvent::FullListingAsked);
    }

    fn long_polls(&self) -> bool {
        true
    }

    async fn drain_budget(&self) -> Option<u64> {
        self.script().drain_budget
    }
}

/// Pending once, then ready (tokio's `yield_now`, without tokio).
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}
