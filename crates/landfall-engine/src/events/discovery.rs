//! Events of discovery rounds: what a listing or a queue round found, passed over and
//! admitted, and the requests it made.

use super::*;

impl StreamEvents {
    /// A listing round ended with the ledger at `s`: the gauges, and the falling-behind check
    /// (the backlog grew at several listings in a row).
    pub fn listing_done(&self, s: &StreamSummary) {
        self.ledger(s);
        let (behind, changed) = self.view().listed(s.pending_files);
        set(
            &self.metrics.falling_behind.get_or_create(&self.label()),
            behind as i64,
        );
        if changed && behind {
            tracing::warn!(stream = %self.stream, listings = crate::progress::FALLING_BEHIND_AFTER, backlog = s.pending_files, "stream is falling behind: its backlog grew at several listings in a row");
        } else if changed {
            tracing::info!(stream = %self.stream, backlog = s.pending_files, "stream caught up");
        }
    }

    /// A counter of the stream's storage requests by operation
    /// (`landfall_storage_requests_total{op}`).
    pub fn request_counter(&self) -> landfall_discovery::CountRequests {
        let (metrics, stream) = (self.metrics.clone(), self.stream.clone());
        let totals = self.requests.clone();
        Arc::new(move |op: &'static str, n: u64| {
            metrics
                .storage_requests
                .get_or_create(&metrics::OpLabel {
                    stream: stream.clone(),
                    op: op.to_string(),
                })
                .inc_by(n);
            *totals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(op)
                .or_default() += n;
        })
    }

    /// Storage and queue requests of this stream in this process, by operation.
    pub fn request_counts(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A listing round ended: `listed` objects, `admitted` of them new, `filtered` left out;
    /// `incremental`: it listed only the keys after the cursor. The log line carries the LIST
    /// requests the round sent (from `landfall_storage_requests_total{op="LIST"}`).
    pub fn discovered(
        &self,
        listed: usize,
        admitted: u64,
        filtered: u64,
        incremental: bool,
        took: Duration,
    ) {
        add(&self.counters.files_discovered, admitted);
        add(&self.counters.files_filtered, filtered);
        let listing = if incremental { "incremental" } else { "full" };
        self.metrics
            .listings
            .get_or_create(&metrics::ListingLabel {
                stream: self.stream.clone(),
                kind: listing.to_string(),
            })
            .inc();
        let lists = self
            .metrics
            .storage_requests
            .get_or_create(&metrics::OpLabel {
                stream: self.stream.clone(),
                op: "LIST".to_string(),
            })
            .get();
        let list_requests = lists.saturating_sub(
            self.lists_seen
                .swap(lists, std::sync::atomic::Ordering::Relaxed),
        );
        if admitted > 0 {
            tracing::info!(stream = %self.stream, listing = %listing, list_requests, listed, admitted, filtered, took_ms = took.as_millis() as u64, "files discovered");
        } else {
            tracing::debug!(stream = %self.stream, listing = %listing, list_requests, listed, filtered, took_ms = took.as_millis() as u64, "no new files");
        }
    }

    /// What a round of notification messages held: malformed messages are logged one by one
    /// with their id (they stay in the queue), the rest counted.
    pub fn queue_round(&self, round: &landfall_core::QueueRound) {
        let count = |family: &crate::metrics::Counters<ReasonLabel>, reason: &str, n: u64| {
            if n > 0 {
                family
                    .get_or_create(&ReasonLabel {
                        stream: self.stream.clone(),
                        reason: reason.into(),
                    })
                    .inc_by(n);
            }
        };
        let malformed = round.malformed.len() as u64;
        let m = &self.metrics.queue_messages;
        count(m, "malformed", malformed);
        count(m, "ignored", round.ignored_messages);
        count(m, "kept", round.extension_failures);
        count(
            m,
            "files",
            round
                .received
                .saturating_sub(malformed + round.ignored_messages),
        );
        count(&self.metrics.queue_events, "removed", round.removed_events);
        count(&self.metrics.queue_events, "other", round.other_events);
        count(
            &self.metrics.queue_events,
            "directory_listed",
            round.directories_listed,
        );
        for bad in &round.malformed {
            tracing::warn!(stream = %self.stream, message_id = %bad.id, receive_count = bad.receive_count, error = %bad.error, "queue message not understood; left in the queue (its redrive policy moves it aside after the max receive count)");
        }
        if round.received > 0 {
            tracing::debug!(stream = %self.stream, received = round.received, ignored = round.ignored_messages, removed_events = round.removed_events, other_events = round.other_events, "queue messages received");
        }
    }

    pub fn queue_depth(&self, depth: u64) {
        *self.queue_depth.lock().unwrap_or_else(|e| e.into_inner()) = Some(depth);
        self.metrics
            .queue_approximate_size
            .get_or_create(&crate::metrics::stream(&self.stream))
            .set(depth as i64);
    }

    pub fn passed_over(&self, reason: &str, path: &str) {
        add(&self.counters.objects_passed_over, 1);
        self.metrics
            .objects_passed_over
            .get_or_create(&ReasonLabel {
                stream: self.stream.clone(),
                reason: reason.into(),
            })
            .inc();
        tracing::debug!(stream = %self.stream, path, reason, "object passed over");
    }
}
