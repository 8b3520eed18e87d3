//! Progress of long steps (SFT epochs, training iterations): an indicatif bar with an ETA on a
//! terminal; elsewhere (logs, CI) one plain line every tenth of the way, so a log shows
//! progress too.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar over `total` steps.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    what: String,
    total: u64,
}

impl Progress {
    /// A bar labelled `what` over `total` steps, drawn on stderr.
    pub fn new(what: &str, total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} {elapsed} eta {eta} {msg}",
                )
                .expect("a valid template")
                .progress_chars("#>."),
            );
            bar.set_prefix(what.to_owned());
            bar
        });
        Self {
            bar,
            what: what.to_owned(),
            total,
        }
    }

    /// Marks `done` steps complete, with a status message.
    pub fn set(&self, done: u64, message: &str) {
        match &self.bar {
            Some(bar) => {
                bar.set_message(message.to_owned());
                bar.set_position(done);
            }
            None => {
                if done == self.total || done.is_multiple_of((self.total / 10).max(1)) {
                    eprintln!("{} {done}/{} {message}", self.what, self.total);
                }
            }
        }
    }

    /// Ends the bar, leaving its last state on screen.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
