//! Inits started ahead of need (`nativeSandbox.warmPool`), so that a new sandbox's start
//! takes one that is already running instead of launching its own.
//!
//! A warm init has served nobody: it is taken out of the pool by the one sandbox that
//! uses it and never comes back (a stopped sandbox's init is shut down as any other), so
//! no state of one tenant can reach the next. An isolated one is a bubblewrap sandbox
//! with no tenant yet, which the sandbox that takes it attaches its own to (see `slot`).
//! Inits are pooled by what they are started from (the keeper, its limits and cgroup,
//! and for an isolated one its namespaces and system paths); each pool is refilled in the
//! background up to the largest size a sandbox of its shape asked for. A default pool (no
//! size asked for) keeps one, and more while starts come in a burst: each start of a burst
//! that finds none ready makes room for one more, up to [`MAX_DEFAULT_IDLE_INITS`], and
//! the pool is back to one once no start has come for [`BURST_IDLE`]. Each init has its
//! own cgroup where its limits need one. An idle init dies with the host as any init does
//! (its death signal and its socket), and its processes (and cgroup) are all it costs.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::error::Result;
use crate::init::{Confinement, Init, Wait};
use crate::isolation::idmap::Stage;
use crate::isolation::slot::{self, SlotLaunch};
use crate::isolation::{self, BindSources, SandboxPolicy};
use crate::limits::Limits;
use crate::sandbox::CgroupPlan;
use crate::sync::Lock;

/// The most inits a pool keeps: each is a process, so a typo cannot start thousands.
pub const MAX_WARM_INITS: u32 = 32;

/// How the inits of a pool are started.
#[derive(Clone)]
pub struct Recipe {
  pub keeper: PathBuf,
  pub limits: Limits,
  pub cgroup: CgroupPlan,
  /// For an isolated init: bubblewrap, and the policy whose namespaces and system paths
  /// it has (nothing of its tenant is read); none for an unconfined one.
  pub slot: Option<(PathBuf, SandboxPolicy)>,
}

/// What makes inits interchangeable: those of one shape are alike in all but their pids.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Shape {
  keeper: PathBuf,
  /// The init's rlimits (the other limits are the host's, or the cgroup's).
  rlimits: Vec<String>,
  cgroup: CgroupPlan,
  /// Bubblewrap and its arguments, for an isolated init.
  slot: Option<(PathBuf, Vec<std::ffi::OsString>)>,
}

impl Recipe {
  fn shape(&self) -> Shape {
    Shape {
      keeper: self.keeper.clone(),
      rlimits: self.limits.keeper_args(false),
      cgroup: self.cgroup,
      slot: self.slot.as_ref().map(|(bwrap, policy)| {
        let args = policy.slot_argv(
          &self.keeper,
          &BindSources::default(),
          slot::slot_root(),
          None,
        );
        (bwrap.clone(), args)
      }),
    }
  }

  /// Starts one init of this recipe, in a cgroup of its own where its limits need one.
  async fn start(&self) -> Result<Init> {
    let cgroup = self.cgroup.create()?;
    let confinement = match &self.slot {
      None => Confinement::None,
      Some((bwrap, policy)) => {
        let stage = match isolation::host_is_root() {
          true => {
            let unreachable = isolation::unreachable_by_sandbox(policy.system_paths());
            Some(Stage::prepare(None, None, &self.keeper, &unreachable)?)
          }
          false => None,
        };
        Confinement::Slot {
          bwrap: bwrap.clone(),
          policy: policy.clone(),
          launch: SlotLaunch::new(),
          stage,
        }
      }
    };
    Init::start(&self.keeper, confinement, &self.limits, cgroup, Wait::Spare).await
  }
}

struct Pool {
  recipe: Recipe,
  ready: VecDeque<Init>,
  /// The largest size asked for.
  size: usize,
  /// What a default pool keeps beyond its size while starts come in a burst (see
  /// [`BURST_GAP`]).
  burst: usize,
  /// When a start last came.
  last_start: Option<Instant>,
  /// A task ends the burst's inits once starts stop coming; at most one per pool.
  shrinking: bool,
  /// A refill runs; at most one per pool.
  filling: bool,
  /// An init of the refill is being launched (not waiting out its delay).
  launching: bool,
  /// A start waits for the refill's next init.
  awaited: bool,
  /// Told when a launch ends, ready or failed.
  launched: Arc<Notify>,
  /// Tells a refill that waits out its delay that a start waits for it.
  hurry: Arc<Notify>,
  /// When a sandbox last asked for it (see [`MAX_IDLE_INITS`]).
  asked: u64,
  /// A sandbox asked for it by size (`warmPool`); else it is a default pool.
  sized: bool,
}

/// The most idle inits all pools keep together: each shape of sandbox (its limits,
/// network, system paths) has a pool of its own. Past it, a refill takes an idle init
/// (and a place) from the pool asked for least recently, or stops.
pub const MAX_IDLE_INITS: usize = 64;

/// The most idle inits the default pools (those no sandbox asked for by size) keep
/// together, within [`MAX_IDLE_INITS`]: a host that runs sandboxes of many shapes (limits
/// per tenant) keeps warm inits for the few it started last, not for every one. One
/// default pool in a burst may hold them all.
pub const MAX_DEFAULT_IDLE_INITS: usize = 4;

/// Starts of one shape that come within this of each other are a burst: one that finds
/// its default pool empty makes it keep one more init (up to [`MAX_DEFAULT_IDLE_INITS`]).
const BURST_GAP: Duration = Duration::from_secs(1);

/// How long a default pool keeps what a burst added once no start comes: then its idle
/// inits beyond its size are ended.
const BURST_IDLE: Duration = Duration::from_secs(3);

/// Counts the visits to pools, so that each knows when it was last asked for.
static ASKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

static POOLS: LazyLock<Mutex<HashMap<Shape, Pool>>> = LazyLock::new(Default::default);

/// What a start found in its pool (one per start, so the size of its variants does not
/// matter).
#[allow(clippy::large_enum_variant)]
enum Found {
  Init(Init),
  /// None ready, but a refill runs: its next init is ready no later than one launched now
  /// would be.
  Coming(Arc<Notify>),
  Nothing,
}

/// A live warm init of `recipe`'s shape, if its pool has one, or if a refill of it runs
/// and `wait` says to wait for it (its next init is awaited, by one start at a time);
/// either way the pool is refilled, in the background, up to `size` (which it keeps from
/// then on if it is the largest yet). A start that does not wait launches its own init,
/// and the refill comes after it. Must be called within the runtime.
pub async fn take(recipe: &Recipe, size: usize, wait: bool) -> Option<Init> {
  let how = match wait {
    true => Visit::Take,
    false => Visit::TakeReady,
  };
  let launched = match visit(recipe, size, how) {
    Found::Init(init) => return Some(init),
    Found::Nothing => return None,
    Found::Coming(launched) => launched,
  };
  // A launch ends within the init's own ready timeout: no deadline of its own.
  launched.notified().await;
  match visit(recipe, size, how) {
    Found::Init(init) => Some(init),
    _ => None,
  }
}

/// Fills the pool of `recipe`'s shape up to `size`, in the background, ahead of the first
/// start that takes from it (a sandbox asks when it is made). Must be called within the
/// runtime.
pub fn fill(recipe: &Recipe, size: usize) {
  visit(recipe, size, Visit::Fill);
}

/// The pids of the inits all pools hold ready now, each with its spare beneath it: the
/// processes the package keeps on purpose, which a look for what a sandbox left behind
/// leaves out.
pub fn idle_pids() -> Vec<u32> {
  POOLS
    .locked()
    .values()
    .flat_map(|pool| pool.ready.iter().filter_map(Init::pid))
    .collect()
}

/// What a visit to a pool is for.
#[derive(Clone, Copy, PartialEq)]
enum Visit {
  Fill,
  /// A start's, which waits for the refill's next init if none is ready.
  Take,
  /// A start's, which takes an init only if one is ready.
  TakeReady,
}

/// [`take`] or [`fill`].
fn visit(recipe: &Recipe, size: usize, visit: Visit) -> Found {
  let shape = recipe.shape();
  let mut pools = POOLS.locked();
  let pool = pools.entry(shape.clone()).or_insert_with(|| Pool {
    recipe: recipe.clone(),
    ready: VecDeque::new(),
    size,
    burst: 0,
    last_start: None,
    shrinking: false,
    filling: false,
    launching: false,
    awaited: false,
    launched: Arc::default(),
    hurry: Arc::default(),
    asked: 0,
    sized: false,
  });
  pool.size = pool.size.max(size);
  pool.sized |= visit != Visit::TakeReady;
  pool.asked = ASKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
  let in_a_burst = visit != Visit::Fill && in_burst(pool);
  // One that died while it waited (killed from outside) is dropped, which reaps it.
  let taken = match visit {
    Visit::Fill => None,
    Visit::Take | Visit::TakeReady => {
      std::iter::from_fn(|| pool.ready.pop_front()).find(Init::is_alive)
    }
  };
  let behind = in_a_burst && taken.is_none();
  if behind && !pool.sized && pool.size + pool.burst < MAX_DEFAULT_IDLE_INITS {
    pool.burst += 1;
    if !pool.shrinking {
      pool.shrinking = true;
      tokio::spawn(end_burst(shape.clone()));
    }
  }
  if !pool.filling && pool.ready.len() < pool.size + pool.burst {
    pool.filling = true;
    // After a start that goes on without waiting for it.
    let delay = match taken.is_some() || visit == Visit::TakeReady {
      true => REFILL_DELAY,
      false => Duration::ZERO,
    };
    // Launching from now on, for a start that comes before the refill's task runs.
    pool.launching = delay.is_zero();
    tokio::spawn(refill(shape, delay, pool.hurry.clone()));
  }
  match taken {
    Some(init) => Found::Init(init),
    None if visit == Visit::Take && pool.filling && !pool.awaited => {
      pool.awaited = true;
      if !pool.launching {
        // Its delay is for a start that took an init, not for one that waits.
        pool.hurry.notify_one();
      }
      Found::Coming(pool.launched.clone())
    }
    None => Found::Nothing,
  }
}

/// How long a refill waits after a start took an init, or went on to launch its own: the
/// first command of that sandbox, which the pool is there to speed up, comes next, and a
/// launch (bubblewrap's namespaces above all) would compete with it for the CPU.
const REFILL_DELAY: Duration = Duration::from_millis(10);

/// Whether a start now comes in a burst (within [`BURST_GAP`] of the one before); it is
/// counted as the last start.
fn in_burst(pool: &mut Pool) -> bool {
  let now = Instant::now();
  let previous = pool.last_start.replace(now);
  previous.is_some_and(|previous| now.duration_since(previous) < BURST_GAP)
}

/// Once no start of `shape` has come for [`BURST_IDLE`], its pool keeps its size again: the
/// idle inits a burst added are ended (dropped, each is shut down and reaped).
async fn end_burst(shape: Shape) {
  let mut wait = BURST_IDLE;
  loop {
    tokio::time::sleep(wait).await;
    let mut pools = POOLS.locked();
    let Some(pool) = pools.get_mut(&shape) else {
      return;
    };
    let idle_for = pool.last_start.map_or(BURST_IDLE, |at| at.elapsed());
    if idle_for < BURST_IDLE {
      wait = BURST_IDLE - idle_for;
      continue;
    }
    pool.burst = 0;
    pool.shrinking = false;
    let kept = pool.size.min(pool.ready.len());
    let ended: Vec<Init> = pool.ready.drain(kept..).collect();
    drop(pools);
    drop(ended);
    return;
  }
}

/// Starts inits one at a time, after `delay` (cut short by `hurry`), until the pool has its
/// size. A failed start ends the refill (the next `take` tries again): the sandbox that
/// needs an init then starts its own and reports why that fails.
async fn refill(shape: Shape, delay: Duration, hurry: Arc<Notify>) {
  let _filling = Filling(shape.clone());
  tokio::select! {
    _ = tokio::time::sleep(delay) => {}
    _ = hurry.notified() => {}
  }
  loop {
    let recipe = {
      let mut pools = POOLS.locked();
      // Full already, it takes no room: an idle init of another pool is not ended for it.
      let wants_one = pools
        .get(&shape)
        .is_some_and(|pool| pool.ready.len() < pool.size + pool.burst);
      if !wants_one || !room_for_one(&mut pools, &shape) {
        return;
      }
      let Some(pool) = pools.get_mut(&shape) else {
        return;
      };
      pool.launching = true;
      pool.recipe.clone()
    };
    let started = recipe.start().await;
    let mut pools = POOLS.locked();
    let Some(pool) = pools.get_mut(&shape) else {
      return;
    };
    launch_ended(pool);
    match started {
      // The burst it was for may have ended meanwhile.
      Ok(init) if pool.ready.len() >= pool.size + pool.burst => {
        drop(pools);
        drop(init);
        return;
      }
      Ok(init) => pool.ready.push_back(init),
      Err(error) => {
        tracing::debug!(%error, "a warm init could not be started");
        return;
      }
    }
  }
}

/// Whether the pool of `shape` may launch one more init within [`MAX_IDLE_INITS`], and a
/// default pool within [`MAX_DEFAULT_IDLE_INITS`] too.
fn room_for_one(pools: &mut HashMap<Shape, Pool>, shape: &Shape) -> bool {
  let by_default = pools.get(shape).is_some_and(|pool| !pool.sized);
  (!by_default || room_among(pools, shape, MAX_DEFAULT_IDLE_INITS, |pool| !pool.sized))
    && room_among(pools, shape, MAX_IDLE_INITS, |_| true)
}

/// Whether the pools that `counted` picks keep fewer than `most` idle inits together, or
/// can be made to: if they are full, an idle init of the one of them asked for least
/// recently (before the pool of `shape`) is ended to make room, and that pool keeps the
/// size it has left.
fn room_among(
  pools: &mut HashMap<Shape, Pool>,
  shape: &Shape,
  most: usize,
  counted: impl Fn(&Pool) -> bool,
) -> bool {
  let idle: usize = pools
    .values()
    .filter(|pool| counted(pool))
    .map(|pool| pool.ready.len() + usize::from(pool.launching))
    .sum();
  if idle < most {
    return true;
  }
  let asked = pools.get(shape).map_or(u64::MAX, |pool| pool.asked);
  let stale = pools
    .iter_mut()
    .filter(|(other, pool)| {
      counted(pool) && *other != shape && !pool.ready.is_empty() && pool.asked < asked
    })
    .min_by_key(|(_, pool)| pool.asked);
  let Some((_, pool)) = stale else {
    return false;
  };
  // Dropped, it is shut down and reaped.
  drop(pool.ready.pop_back());
  pool.size = pool.ready.len();
  pool.burst = 0;
  true
}

/// A launch of `pool` ended: the start that awaits it, if any, is told.
fn launch_ended(pool: &mut Pool) {
  pool.launching = false;
  if std::mem::take(&mut pool.awaited) {
    pool.launched.notify_one();
  }
}

/// A refill of the pool of its shape runs while this lives: however it ends (done, failed,
/// or its task dropped or panicking), the next `take` may start another, and a start that
/// awaits it is not left waiting.
struct Filling(Shape);

impl Drop for Filling {
  fn drop(&mut self) {
    if let Some(pool) = POOLS.locked().get_mut(&self.0) {
      pool.filling = false;
      launch_ended(pool);
    }
  }
}
