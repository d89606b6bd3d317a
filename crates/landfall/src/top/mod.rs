//! `landfall top`: a terminal view of a running daemon's streams, read from its HTTP API and
//! refreshed every second, for hosts without a browser. Keys: `q`, `Esc` or `Ctrl-C` quit;
//! `↑`/`↓` (or `k`/`j`), `Home`/`End` choose the stream whose last hour and batches are shown.
//!
//! It only reads (`GET /api/v1/...`): it needs no admin token and changes nothing. A daemon
//! that cannot be reached is said so on the header line while the last data stays on screen.

mod model;
mod view;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

pub fn run(listen: &str) -> ExitCode {
    if !std::io::stdout().is_terminal() {
        eprintln!(
            "error: landfall top draws on a terminal; for a script use `landfall streams` or \
             GET /api/v1/streams"
        );
        return ExitCode::FAILURE;
    }
    let addr = crate::http::reachable(listen);
    let selected_name = Arc::new(Mutex::new(None::<String>));
    let wake = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    {
        let (addr, selected_name, wake) = (addr.clone(), selected_name.clone(), wake.clone());
        std::thread::spawn(move || model::fetcher(addr, selected_name, wake, tx));
    }
    // Restores the terminal on a panic too.
    let mut terminal = ratatui::init();
    let outcome = (|| -> std::io::Result<()> {
        let (mut good, mut last) = (None::<model::Snapshot>, None::<model::Snapshot>);
        let mut selected = 0usize;
        loop {
            loop {
                match rx.try_recv() {
                    Ok(s) => {
                        if s.streams.is_ok() {
                            good = Some(s.clone());
                        }
                        last = Some(s);
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    // The reader ended (it panicked): stale data must not pass for live.
                    Err(mpsc::TryRecvError::Disconnected) => {
                        return Err(std::io::Error::other("the thread reading the daemon ended"));
                    }
                }
            }
            let names: Vec<String> = good
                .as_ref()
                .and_then(|s| s.streams.as_ref().ok())
                .map(|v| v.iter().map(|r| r.name.clone()).collect())
                .unwrap_or_default();
            selected = selected.min(names.len().saturating_sub(1));
            let want = names.get(selected).cloned();
            {
                let mut cur = selected_name.lock().unwrap_or_else(|e| e.into_inner());
                if *cur != want {
                    *cur = want;
                    wake.store(true, Ordering::SeqCst);
                }
            }
            terminal.draw(|f| {
                view::draw(
                    f,
                    &view::Screen {
                        addr: &addr,
                        good: good.as_ref(),
                        last: last.as_ref(),
                        selected,
                    },
                )
            })?;
            if !event::poll(Duration::from_millis(100))? {
                continue;
            }
            let Event::Key(k) = event::read()? else {
                continue;
            };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            match k.code {
                KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => return Ok(()),
                KeyCode::Down | KeyCode::Char('j') => {
                    selected = (selected + 1).min(names.len().saturating_sub(1))
                }
                KeyCode::Up | KeyCode::Char('k') => selected = selected.saturating_sub(1),
                KeyCode::Home => selected = 0,
                KeyCode::End => selected = names.len().saturating_sub(1),
                _ => {}
            }
        }
    })();
    ratatui::restore();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: landfall top: {e}");
            ExitCode::FAILURE
        }
    }
}
