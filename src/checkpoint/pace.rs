//! Whether background checkpoints keep up with the run. A write slower than the steps between
//! two checkpoints makes each checkpoint wait for the one before, and the run then steps at
//! the disk's pace. The first time that holds a run noticeably, the log says so and names the
//! interval that would not.

use std::time::Instant;

/// The last checkpoint's step and time, and whether the run was told.
#[derive(Default)]
pub(crate) struct Pace {
    last: Option<(u64, Instant)>,
    warned: bool,
}

impl Pace {
    /// At the checkpoint of `step`, which waited `waited` seconds for the previous write, which
    /// took `write_seconds`: the warning to give, once per run.
    pub(crate) fn at_checkpoint(
        &mut self,
        step: u64,
        waited: f64,
        write_seconds: Option<f64>,
    ) -> Option<String> {
        let now = Instant::now();
        let last = self.last.replace((step, now));
        let ((step0, t0), write) = (last?, write_seconds?);
        if self.warned || step <= step0 {
            return None;
        }
        let steps = step - step0;
        let stepping = (now - t0).as_secs_f64() - waited;
        let advice = slow_write_advice(steps, stepping, waited, write)?;
        self.warned = true;
        Some(format!(
            "checkpoints are written more slowly than the run steps: this one waited {waited:.2} s \
             for the previous write ({write:.2} s), while the {steps} steps between them took \
             {stepping:.2} s, so the run steps at about {:.0}% of its rate; fix: \
             output.checkpoint_interval of {} steps or more keeps it at full speed (or a faster \
             disk for the output directory)",
            100.0 * advice.share,
            advice.interval
        ))
    }
}

/// What a run held by its checkpoints' writes is told.
#[derive(Debug, PartialEq)]
pub(crate) struct SlowWrite {
    /// The share of the time the run stepped.
    pub share: f64,
    /// The shortest interval (steps, rounded up to a hundred) whose stepping outlasts a write,
    /// with 10% to spare.
    pub interval: u64,
}

/// `steps` steps took `stepping` seconds and the checkpoint after them waited `waited` seconds
/// for a write of `write` seconds: advice when the wait held the run by 5% or more of its
/// stepping time and at least 0.2 s (None otherwise, or without a measurable stepping time).
pub(crate) fn slow_write_advice(
    steps: u64,
    stepping: f64,
    waited: f64,
    write: f64,
) -> Option<SlowWrite> {
    if steps == 0 || stepping <= 0.0 || waited < 0.2 || waited < 0.05 * stepping {
        return None;
    }
    let per_step = stepping / steps as f64;
    let interval = (1.1 * write / per_step).ceil() as u64;
    Some(SlowWrite {
        share: stepping / (stepping + waited),
        interval: interval.div_ceil(100).max(1) * 100,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 4-GPU case of docs/reliability.md: 1000 steps in 4.0 s, a write of 5.0 s, a wait of
    /// 1.0 s: 80% of the rate, and 1400 steps (5.5 s of stepping) would outlast the write.
    #[test]
    fn a_write_slower_than_the_interval_names_one_that_keeps_up() {
        let a = slow_write_advice(1000, 4.0, 1.0, 5.0).unwrap();
        assert!((a.share - 0.8).abs() < 1e-12, "{a:?}");
        assert_eq!(a.interval, 1400);
        // the interval named lets the steps outlast the write
        assert!(a.interval as f64 * 4.0 / 1000.0 > 5.0);
    }

    /// Short waits, and waits small against the stepping, are no news.
    #[test]
    fn a_short_wait_is_not_reported() {
        assert_eq!(slow_write_advice(1000, 4.0, 0.1, 4.1), None);
        assert_eq!(slow_write_advice(1000, 40.0, 1.0, 41.0), None);
        assert_eq!(slow_write_advice(0, 4.0, 1.0, 5.0), None);
    }

    /// The first checkpoint has nothing to compare with; the run is told once.
    #[test]
    fn the_run_is_told_once() {
        let mut p = Pace::default();
        assert_eq!(p.at_checkpoint(1000, 0.0, None), None);
        // 0.3 s pass, 0.25 s of them waiting: the wait held the run longer than it stepped
        std::thread::sleep(std::time::Duration::from_millis(300));
        let told = p.at_checkpoint(2000, 0.25, Some(0.3)).expect("told");
        assert!(told.contains("checkpoint_interval"), "{told}");
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(p.at_checkpoint(3000, 0.25, Some(0.3)), None);
    }
}
