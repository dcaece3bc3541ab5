//! Inits started ahead of need (`nativeSandbox.warmPool`), so that a new sandbox's start
//! takes one that is already running instead of launching its own.
//!
//! A warm init has served nobody: it is taken out of the pool by the one sandbox that
//! uses it and never comes back (a stopped sandbox's init is shut down as any other), so
//! no state of one tenant can reach the next. Inits are pooled by what they are started
//! from (the keeper and its rlimits); each pool is refilled in the background up to the
//! largest size a sandbox of its shape asked for. An idle init dies with the host as any
//! init does (its death signal and its socket), and its process is all it costs.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use crate::init::{Confinement, Init};
use crate::limits::Limits;
use crate::sync::Lock;

/// The most inits a pool keeps: each is a process, so a typo cannot start thousands.
pub const MAX_WARM_INITS: u32 = 32;

/// What an init is started from: inits of the same shape are interchangeable.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Shape {
  keeper: PathBuf,
  rlimits: Vec<String>,
}

impl Shape {
  /// The shape of an unconfined init without a cgroup, with `limits` as its rlimits.
  pub fn unconfined(keeper: &Path, limits: &Limits) -> Shape {
    Shape {
      keeper: keeper.to_path_buf(),
      rlimits: limits.keeper_args(false),
    }
  }
}

struct Pool {
  limits: Limits,
  ready: VecDeque<Init>,
  /// The largest size asked for.
  size: usize,
  /// A refill runs; at most one per pool.
  filling: bool,
}

static POOLS: LazyLock<Mutex<HashMap<Shape, Pool>>> = LazyLock::new(Default::default);

/// A live warm init of `shape`, if the pool has one; either way the pool is refilled, in
/// the background, up to `size` (which it keeps from then on if it is the largest yet).
/// Must be called within the runtime.
pub fn take(shape: &Shape, limits: &Limits, size: usize) -> Option<Init> {
  let mut pools = POOLS.locked();
  let pool = pools.entry(shape.clone()).or_insert_with(|| Pool {
    limits: limits.clone(),
    ready: VecDeque::new(),
    size,
    filling: false,
  });
  pool.size = pool.size.max(size);
  // One that died while it waited (killed from outside) is dropped, which reaps it.
  let taken = std::iter::from_fn(|| pool.ready.pop_front()).find(Init::is_alive);
  if !pool.filling && pool.ready.len() < pool.size {
    pool.filling = true;
    tokio::spawn(refill(shape.clone()));
  }
  taken
}

/// Starts inits one at a time until the pool has its size. A failed start ends the refill
/// (the next `take` tries again): the sandbox that needs an init then starts its own and
/// reports why that fails.
async fn refill(shape: Shape) {
  loop {
    let limits = {
      let mut pools = POOLS.locked();
      let Some(pool) = pools.get_mut(&shape) else {
        return;
      };
      if pool.ready.len() >= pool.size {
        pool.filling = false;
        return;
      }
      pool.limits.clone()
    };
    let started = Init::start(&shape.keeper, Confinement::None, &limits, None).await;
    let mut pools = POOLS.locked();
    let Some(pool) = pools.get_mut(&shape) else {
      return;
    };
    match started {
      Ok(init) => pool.ready.push_back(init),
      Err(error) => {
        tracing::debug!(%error, "a warm init could not be started");
        pool.filling = false;
        return;
      }
    }
  }
}
