//! Progress of a run for people: a bar on a terminal, a log line every 30 s in batch jobs
//! (step, steps/s, particle-steps/s, ETA), nothing with `--quiet`. Hosts without a log
//! subscriber (Python) have the lines printed on stderr ([`Bar::with_plain_lines`]).

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::run::Progress;

/// The `mpcbox run` progress display.
pub struct Bar {
    bar: Option<ProgressBar>,
    /// Not on a terminal (a batch job): a log line every `LINE_SECONDS` instead of a bar.
    lines: bool,
    /// Seconds between progress lines.
    line_seconds: f64,
    /// Lines printed on stderr rather than logged.
    plain: bool,
    last_line: Instant,
    to: u64,
    particles: u64,
    from: u64,
    t0: Instant,
}

/// Seconds between progress lines in batch jobs.
const LINE_SECONDS: f64 = 30.0;

impl Bar {
    /// A progress bar on stderr when it is a terminal and not `quiet`.
    pub fn new(total: u64, quiet: bool) -> Bar {
        let show = !quiet && std::io::stderr().is_terminal();
        let bar = show.then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} steps, ETA {eta} | {msg}")
                    .expect("valid template"),
            );
            b
        });
        Bar {
            lines: !quiet && bar.is_none(),
            line_seconds: LINE_SECONDS,
            plain: false,
            bar,
            last_line: Instant::now(),
            to: total,
            particles: 0,
            from: 0,
            t0: Instant::now(),
        }
    }
}

impl Bar {
    /// Progress lines (where there is no bar) printed on stderr every `seconds`, rather than
    /// logged every 30 s.
    pub fn with_plain_lines(mut self, seconds: f64) -> Bar {
        self.line_seconds = seconds;
        self.plain = true;
        self
    }
}

impl Progress for Bar {
    fn start(&mut self, from: u64, to: u64, particles: u64) {
        self.particles = particles;
        self.from = from;
        self.to = to;
        self.t0 = Instant::now();
        self.last_line = self.t0;
        if let Some(b) = &self.bar {
            b.set_length(to);
            b.set_position(from);
        }
    }
    fn advance(&mut self, step: u64) {
        if self.lines && self.last_line.elapsed().as_secs_f64() >= self.line_seconds {
            self.last_line = Instant::now();
            let dt = self.t0.elapsed().as_secs_f64().max(1e-9);
            let sps = (step - self.from) as f64 / dt;
            let eta = self.to.saturating_sub(step) as f64 / sps.max(1e-12);
            let line = format!(
                "step {step}/{}: {sps:.2} steps/s, {:.3e} particle-steps/s, ETA {eta:.0} s",
                self.to,
                sps * self.particles as f64
            );
            match self.plain {
                true => eprintln!("mpcbox: {line}"),
                false => tracing::info!("{line}"),
            }
        }
        if let Some(b) = &self.bar {
            b.set_position(step);
            if step.is_multiple_of(16) {
                let dt = self.t0.elapsed().as_secs_f64().max(1e-9);
                let sps = (step - self.from) as f64 / dt;
                b.set_message(format!(
                    "{sps:.1} steps/s, {:.3e} particle-steps/s",
                    sps * self.particles as f64
                ));
            }
        }
    }
    fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
