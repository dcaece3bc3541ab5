//! How long each step of a sandbox's last start took: the benchmark shows them side by
//! side, so the cost of an isolated start can be read step by step.

use std::time::{Duration, Instant};

/// The steps of one start, in the order they ran.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StartTimings {
  pub steps: Vec<(&'static str, Duration)>,
}

/// Times consecutive steps: each lap is the time since the previous one.
pub struct Laps {
  last: Instant,
  timings: StartTimings,
}

impl Default for Laps {
  fn default() -> Self {
    Laps::new()
  }
}

impl Laps {
  pub fn new() -> Laps {
    Laps {
      last: Instant::now(),
      timings: StartTimings::default(),
    }
  }

  /// Ends step `name` now.
  pub fn lap(&mut self, name: &'static str) {
    let now = Instant::now();
    self.timings.steps.push((name, now - self.last));
    self.last = now;
  }

  /// Ends step `name` now, listed first: a step that ran beside the earlier ones, whose
  /// time is the wait for it after them.
  pub fn lap_first(&mut self, name: &'static str) {
    let now = Instant::now();
    self.timings.steps.insert(0, (name, now - self.last));
    self.last = now;
  }

  pub fn finish(self) -> StartTimings {
    self.timings
  }
}
