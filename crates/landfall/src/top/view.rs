//! The screen of `landfall top`: a header line, the streams table (the selected row marked
//! `>`), the selected stream's last hour as two sparklines (rows committed per second, backlog
//! in files), its last batches, and its error when it has one.

use super::model::{Detail, Snapshot, StreamRow};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Cell, Paragraph, RenderDirection, Row, Sparkline, Table, TableState, Wrap,
};

/// What the screen draws from.
pub struct Screen<'a> {
    pub addr: &'a str,
    /// The last snapshot that reached the daemon, and the last one taken.
    pub good: Option<&'a Snapshot>,
    pub last: Option<&'a Snapshot>,
    pub selected: usize,
}

const DASH: &str = "-";

fn int<T: ToString>(v: Option<T>) -> String {
    v.map_or(DASH.to_string(), |v| v.to_string())
}

/// Bytes in binary units without a space (`1.5KiB`), so each column is one word.
pub fn bytes(n: Option<u64>) -> String {
    n.map_or(DASH.into(), |n| {
        landfall_core::size::human_bytes(n).replace(' ', "")
    })
}

fn state_style(state: &str) -> Style {
    match state {
        "running" => Style::new().fg(Color::Green),
        "drained" => Style::new().fg(Color::Blue),
        "restarting" => Style::new().fg(Color::Yellow),
        "stopped" => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        _ => Style::new().fg(Color::DarkGray),
    }
}

const HEADS: [&str; 11] = [
    "STREAM", "STATE", "BACKLOG", "BYTES", "BATCH", "ROWS", "FILES", "VERSION", "ROWS/S",
    "RESTARTS", "BEHIND",
];

fn row(s: &StreamRow) -> Row<'_> {
    Row::new(vec![
        Cell::from(s.name.as_str()),
        Cell::from(s.state.as_str()).style(state_style(&s.state)),
        Cell::from(int(s.files_outstanding)),
        Cell::from(bytes(s.bytes_outstanding)),
        Cell::from(int(s.batch_id)),
        Cell::from(int(s.rows)),
        Cell::from(int(s.files)),
        Cell::from(int(s.table_version)),
        Cell::from(
            s.input_rows_per_second
                .map_or(DASH.to_string(), |r| format!("{r:.1}")),
        ),
        Cell::from(s.restarts.to_string()),
        Cell::from(if s.falling_behind { "yes" } else { "no" }),
    ])
}

fn header(f: &mut Frame, area: Rect, sc: &Screen) {
    let mut spans = vec![
        Span::styled("landfall top", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!("  {}  ", sc.addr)),
    ];
    match sc.last {
        None => spans.push(Span::raw("reading the daemon...")),
        Some(s) => match &s.streams {
            Ok(rows) => {
                let failing = rows
                    .iter()
                    .filter(|r| r.state == "stopped" || r.state == "restarting")
                    .count();
                spans.push(Span::raw(format!(
                    "{} stream{}{}  updated {}",
                    rows.len(),
                    if rows.len() == 1 { "" } else { "s" },
                    if failing > 0 {
                        format!(", {failing} failing")
                    } else {
                        String::new()
                    },
                    s.taken.format("%H:%M:%S")
                )));
            }
            Err(e) => spans.push(Span::styled(
                format!("cannot read the daemon: {e} (retrying every second)"),
                Style::new().fg(Color::Red),
            )),
        },
    }
    spans.push(Span::styled(
        "   q quit  \u{2191}\u{2193} select",
        Style::new().fg(Color::DarkGray),
    ));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// `newest_first`: drawn from the right edge leftwards, so the newest point is at the right.
fn sparkline<'a>(title: String, newest_first: &'a [u64]) -> Sparkline<'a> {
    Sparkline::default()
        .block(Block::bordered().title(title))
        .data(newest_first)
        .direction(RenderDirection::RightToLeft)
        .style(Style::new().fg(Color::Cyan))
}

fn detail(f: &mut Frame, area: Rect, d: &Detail, error: Option<&str>) {
    let [charts, batches, err] = Layout::vertical([
        Constraint::Min(6),
        Constraint::Length(d.batches.len().max(1) as u16 + 3),
        Constraint::Length(if error.is_some() { 5 } else { 0 }),
    ])
    .areas(area);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts);
    let window = if d.step_ms > 0 {
        format!("a point per {:.1} s", d.step_ms as f64 / 1000.0)
    } else {
        "no point yet".into()
    };
    // The newest points that fit the box.
    let fit = |n: usize, w: u16| n.saturating_sub(w.saturating_sub(2) as usize);
    let rows = &d.rows_per_second[fit(d.rows_per_second.len(), left.width)..];
    let rows_drawn: Vec<u64> = rows.iter().rev().map(|v| v.ceil() as u64).collect();
    let rmax = rows.iter().copied().fold(0.0, f64::max);
    let rnow = rows.last().copied().unwrap_or(0.0);
    f.render_widget(
        sparkline(
            format!(
                " {}: rows/s now {rnow:.1}, max {rmax:.1} ({window}) ",
                d.name
            ),
            &rows_drawn,
        ),
        left,
    );
    let backlog = &d.files_outstanding[fit(d.files_outstanding.len(), right.width)..];
    let bnow = backlog.last().copied().unwrap_or(0);
    let bmax = backlog.iter().copied().max().unwrap_or(0);
    let backlog_drawn: Vec<u64> = backlog.iter().rev().copied().collect();
    f.render_widget(
        sparkline(
            format!(" backlog files now {bnow}, max {bmax} "),
            &backlog_drawn,
        ),
        right,
    );
    let rows: Vec<Row> = d
        .batches
        .iter()
        .map(|b| {
            Row::new(vec![
                b.batch_id.to_string(),
                b.timestamp.get(11..19).unwrap_or(&b.timestamp).to_string(),
                b.files.to_string(),
                b.rows.to_string(),
                format!("{}ms", b.duration_ms),
                b.table_version.to_string(),
            ])
        })
        .collect();
    let empty = rows.is_empty();
    let table = Table::new(
        rows,
        [
            Constraint::Length(8),
            Constraint::Length(10),
            Constraint::Length(8),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(8),
        ],
    )
    .header(
        Row::new(["BATCH", "AT (UTC)", "FILES", "ROWS", "DURATION", "VERSION"])
            .style(Style::new().add_modifier(Modifier::BOLD)),
    )
    .block(Block::bordered().title(format!(
        " last batches of {}{} ",
        d.name,
        if empty {
            ": none in this process yet"
        } else {
            ""
        }
    )));
    f.render_widget(table, batches);
    if let Some(e) = error {
        f.render_widget(
            Paragraph::new(e)
                .style(Style::new().fg(Color::Red))
                .wrap(Wrap { trim: true })
                .block(Block::bordered().title(format!(" error of {} ", d.name))),
            err,
        );
    }
}

pub fn draw(f: &mut Frame, sc: &Screen) {
    let streams: &[StreamRow] = sc
        .good
        .and_then(|s| s.streams.as_ref().ok())
        .map_or(&[], |v| v.as_slice());
    let table_h = (streams.len() as u16 + 3).min(f.area().height / 2).max(4);
    let [top, list, rest] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_h),
        Constraint::Min(0),
    ])
    .areas(f.area());
    header(f, top, sc);
    let widths = [
        Constraint::Fill(1),
        Constraint::Length(11),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(6),
    ];
    let table = Table::new(streams.iter().map(row), widths)
        .header(Row::new(HEADS).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::bordered().title(" streams "))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    let mut state =
        TableState::default().with_selected((!streams.is_empty()).then_some(sc.selected));
    f.render_stateful_widget(table, list, &mut state);
    let chosen = streams.get(sc.selected);
    let detail_of = sc.good.and_then(|s| s.detail.as_ref());
    match (chosen, detail_of) {
        (Some(s), Some((n, Ok(d)))) if *n == s.name => detail(f, rest, d, s.error.as_deref()),
        (Some(s), Some((n, Err(e)))) if *n == s.name => f.render_widget(
            Paragraph::new(format!("cannot read the detail of {}: {e}", s.name))
                .wrap(Wrap { trim: true }),
            rest,
        ),
        (Some(s), _) => f.render_widget(Paragraph::new(format!("reading {}...", s.name)), rest),
        (None, _) => f.render_widget(Paragraph::new("no stream"), rest),
    }
}
