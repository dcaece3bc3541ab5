//! The lifecycle every sandbox shares: status, hooks, and start/stop/destroy that are
//! coalesced (concurrent callers share one transition) and idempotent. What a transition
//! actually does is the provider's: a local sandbox's own steps, or a JavaScript
//! backend's methods.
//!
//! Hooks run inside their transition, so a hook that waits for another transition of its
//! own provider would wait for itself; the JavaScript layer refuses such calls at once.
//! Whatever a hook does, a failing `onStop`/`onDestroy` still stops/destroys the provider,
//! and a failing `onStart` abandons the start.
//!
//! A stop or destroy is counted from the moment it is asked for, and a call carries when it
//! was made ([`Called`]): what was asked for before a stop, or while one was under way, is
//! that stop's to end, however late its own work gets to run. It starts nothing after the
//! stop, and uses nothing of the provider once the stop has settled; only a call made after
//! it starts the provider again.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{CoreError, Result};
use crate::process::output::BoxFuture;
use crate::sync::Lock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
  Pending,
  Starting,
  Running,
  Stopping,
  Stopped,
  Destroying,
  Destroyed,
  Error,
}

impl Status {
  pub fn as_str(self) -> &'static str {
    match self {
      Status::Pending => "pending",
      Status::Starting => "starting",
      Status::Running => "running",
      Status::Stopping => "stopping",
      Status::Stopped => "stopped",
      Status::Destroying => "destroying",
      Status::Destroyed => "destroyed",
      Status::Error => "error",
    }
  }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartOutcome {
  /// What the provider works in did not exist and was created (a local sandbox: its
  /// working directory).
  Created,
  /// It already existed, or the provider was already running.
  Connected,
}

impl StartOutcome {
  pub fn as_str(self) -> &'static str {
    match self {
      StartOutcome::Created => "created",
      StartOutcome::Connected => "connected",
    }
  }
}

/// A lifecycle hook. An `Err` carries the hook's error message.
pub type Hook<A> = Arc<dyn Fn(A) -> BoxFuture<std::result::Result<(), String>> + Send + Sync>;

#[derive(Default, Clone)]
pub struct Hooks {
  pub on_start: Option<Hook<StartOutcome>>,
  pub on_stop: Option<Hook<()>>,
  pub on_destroy: Option<Hook<()>>,
}

/// Whether a start runs the `onStart` hook. A host whose hook is a round trip to another
/// thread (JavaScript's) skips it when it knows the hook has nothing to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnStart {
  Run,
  Skip,
}

/// The steps a provider takes on each transition.
pub trait Provider: Sync {
  fn start(&self) -> impl Future<Output = Result<StartOutcome>> + Send;
  fn stop(&self) -> impl Future<Output = Result<()>> + Send;
  fn destroy(&self) -> impl Future<Output = Result<()>> + Send;
  /// Releases what a start that failed after the provider's own step (in `onStart`) left
  /// running. Nothing by default: a backend keeps what it started, as its `stop` decides.
  fn abandon(&self) -> impl Future<Output = ()> + Send {
    async {}
  }
  /// Removes what the provider has without having started: what an earlier process left
  /// under a name given to this one (a container found by its id). Nothing by default.
  fn destroy_unstarted(&self) -> impl Future<Output = Result<()>> + Send {
    async { Ok(()) }
  }
}

/// When a call was made, as the lifecycle counts its stops: how many stops and destroys had
/// settled by then (see [`Lifecycle::starts_for`] and [`Lifecycle::runs_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Called(pub u64);

/// The stops and destroys asked for, and those settled.
#[derive(Default)]
struct Stops {
  asked: AtomicU64,
  settled: AtomicU64,
}

/// A stop or destroy asked for ([`Lifecycle::ask_stop`]). It settles once it and its
/// clones are dropped: the transition's when it ends (or is dropped before it ran), and
/// that of a host whose own part of the stop follows the transition (JavaScript's
/// unmounting) once that is done too.
#[derive(Clone)]
pub struct StopAsked {
  /// Held for its drop.
  _settles: Arc<Settles>,
}

/// Counts its stop as settled when dropped.
struct Settles(Arc<Stops>);

impl Drop for Settles {
  fn drop(&mut self) {
    self.0.settled.fetch_add(1, Ordering::AcqRel);
  }
}

/// What concurrent `start` callers need to share one start.
struct StartRecord {
  completed: u64,
  outcome: StartOutcome,
  in_flight: bool,
  /// The start in flight runs an `onStart` hook after its provider's start.
  runs_hook: bool,
}

pub struct Lifecycle {
  id: String,
  hooks: Mutex<Hooks>,
  /// A watch, so that callers can wait for a status to be left (see [`Self::started`]).
  state: tokio::sync::watch::Sender<(Status, Option<String>)>,
  /// Serialises transitions; concurrent callers queue and then find the work done.
  transition: tokio::sync::Mutex<()>,
  last_start: Mutex<StartRecord>,
  /// Set by [`Self::host_gone`]: the status stays `destroyed`.
  host_gone: AtomicBool,
  stops: Arc<Stops>,
}

impl Lifecycle {
  pub fn new(id: String, hooks: Hooks) -> Self {
    Lifecycle {
      id,
      hooks: Mutex::new(hooks),
      state: tokio::sync::watch::Sender::new((Status::Pending, None)),
      transition: tokio::sync::Mutex::new(()),
      last_start: Mutex::new(StartRecord {
        completed: 0,
        outcome: StartOutcome::Connected,
        in_flight: false,
        runs_hook: false,
      }),
      host_gone: AtomicBool::new(false),
      stops: Arc::default(),
    }
  }

  pub fn status(&self) -> Status {
    self.state.borrow().0
  }

  /// The moment of a call made now (see [`Called`]).
  pub fn called_now(&self) -> Called {
    Called(self.stops.settled.load(Ordering::Acquire))
  }

  /// Counts a stop (or destroy) as asked for from now on, before its transition runs:
  /// calls made until then are its to end. It settles as the returned value is dropped.
  pub fn ask_stop(&self) -> StopAsked {
    self.stops.asked.fetch_add(1, Ordering::AcqRel);
    StopAsked {
      _settles: Arc::new(Settles(self.stops.clone())),
    }
  }

  /// Whether a call made at `called` may start the provider: no stop was under way then,
  /// nor has one been asked for since.
  pub fn starts_for(&self, called: Called) -> bool {
    self.stops.asked.load(Ordering::Acquire) == called.0
  }

  /// Whether a call made at `called` may still use the provider: no stop has settled since
  /// (one under way ends what the call starts, as it ends the rest).
  pub fn runs_for(&self, called: Called) -> bool {
    self.stops.settled.load(Ordering::Acquire) == called.0
  }

  /// The message of the last failure, while the status is `error`.
  pub fn error(&self) -> Option<String> {
    self.state.borrow().1.clone()
  }

  /// Whether the start in flight runs an `onStart` hook once its provider has started:
  /// nothing may run in the sandbox before that hook has.
  pub fn start_runs_hook(&self) -> bool {
    let last = self.last_start.locked();
    last.in_flight && last.runs_hook
  }

  /// Resolves once the status is not `starting`. Unlike joining the start it does not
  /// wait for its `onStart` hook, which runs once the status is `running` and may itself
  /// wait for the caller.
  pub async fn started(&self) {
    let mut status = self.state.subscribe();
    // The sender lives as long as `self`: the wait ends only on a status.
    let _ = status.wait_for(|(s, _)| *s != Status::Starting).await;
  }

  fn set_status(&self, status: Status) {
    self.publish((status, None));
  }

  fn fail<T>(&self, err: CoreError) -> Result<T> {
    self.publish((Status::Error, Some(err.to_string())));
    Err(err)
  }

  /// The new status, unless the host is gone. Looked at under the watch's lock, which
  /// `host_gone` takes after it marks the host gone: a status published meanwhile is
  /// replaced by `destroyed`.
  fn publish(&self, state: (Status, Option<String>)) {
    self.state.send_if_modified(|current| {
      let publish = !self.host_is_gone();
      if publish {
        *current = state;
      }
      publish
    });
  }

  /// For a provider whose host went away without destroying it: `destroyed` from now on,
  /// whatever a transition in flight would make it, and its hooks (the host's functions)
  /// are never called again.
  pub fn host_gone(&self) {
    self.host_gone.store(true, Ordering::Release);
    *self.hooks.locked() = Hooks::default();
    self.state.send_replace((Status::Destroyed, None));
  }

  pub fn host_is_gone(&self) -> bool {
    self.host_gone.load(Ordering::Acquire)
  }

  /// A running provider lost what it runs on (its container was stopped or removed from
  /// outside): the status becomes `error` with the reason, so the next start, or the lazy
  /// start of the next command, makes it run again. In any other status the lifecycle is
  /// already moving, and is left to it.
  pub fn lost(&self, err: &CoreError) {
    self.state.send_if_modified(|state| {
      // Once the host is gone the status is `destroyed`, never `running`.
      let running = state.0 == Status::Running;
      if running {
        *state = (Status::Error, Some(err.to_string()));
      }
      running
    });
  }

  fn hooks(&self) -> Hooks {
    self.hooks.locked().clone()
  }

  async fn run_hook<A>(&self, hook: Option<Hook<A>>, arg: A, name: &'static str) -> Result<()> {
    match hook {
      Some(hook) => hook(arg).await.map_err(|message| CoreError::HookFailed {
        id: self.id.clone(),
        hook: name,
        message,
      }),
      None => Ok(()),
    }
  }

  /// Starts the provider for a call made at `called`, unless a stop is that call's end.
  pub async fn start<P: Provider>(&self, provider: &P, called: Called) -> Result<StartOutcome> {
    self.start_with(provider, OnStart::Run, called).await
  }

  /// [`Self::start`], with `onStart` skipped when the caller knows it has nothing to do.
  /// A caller that joins a start in flight shares it as it runs.
  pub async fn start_with<P: Provider>(
    &self,
    provider: &P,
    on_start: OnStart,
    called: Called,
  ) -> Result<StartOutcome> {
    let seen = {
      let last = self.last_start.locked();
      // Running with no start in flight (its hook done): nothing to join.
      if self.status() == Status::Running && !last.in_flight {
        return Ok(StartOutcome::Connected);
      }
      last.completed
    };
    let _turn = self.transition.lock().await;
    match self.status() {
      Status::Running => {
        // A caller that queued behind a start shares that start's outcome.
        let last = self.last_start.locked();
        return Ok(if last.completed > seen {
          last.outcome
        } else {
          StartOutcome::Connected
        });
      }
      Status::Destroyed | Status::Destroying => return Err(CoreError::Destroyed),
      _ => {}
    }
    // Looked at under the turn, which a stop takes after it was asked for: one asked before
    // this start has ended it already, one asked after ends it next.
    if !self.starts_for(called) {
      return Err(CoreError::NotReady(self.id.clone()));
    }
    self.set_status(Status::Starting);
    {
      let runs_hook = on_start == OnStart::Run && self.hooks.locked().on_start.is_some();
      let mut last = self.last_start.locked();
      last.in_flight = true;
      last.runs_hook = runs_hook;
    }
    let result = self.run_start(provider, on_start).await;
    let mut last = self.last_start.locked();
    last.in_flight = false;
    if let Ok(outcome) = result {
      last.completed += 1;
      last.outcome = outcome;
    }
    result
  }

  async fn run_start<P: Provider>(&self, provider: &P, on_start: OnStart) -> Result<StartOutcome> {
    let outcome = match provider.start().await {
      Ok(outcome) => outcome,
      Err(e) => return self.fail(e),
    };
    // Running before the hook, so commands the hook issues do not wait for this start.
    self.set_status(Status::Running);
    let hook = match on_start {
      OnStart::Run => self.hooks().on_start,
      OnStart::Skip => None,
    };
    if let Err(e) = self.run_hook(hook, outcome, "onStart").await {
      provider.abandon().await;
      return self.fail(e);
    }
    Ok(outcome)
  }

  /// Stops the provider; `_asked` ([`Self::ask_stop`]) is let go as this ends.
  pub async fn stop<P: Provider>(&self, provider: &P, _asked: StopAsked) -> Result<()> {
    let _turn = self.transition.lock().await;
    if matches!(self.status(), Status::Stopped | Status::Destroyed) {
      return Ok(());
    }
    self.set_status(Status::Stopping);
    let hooked = self.run_hook(self.hooks().on_stop, (), "onStop").await;
    // A failing hook still stops the provider: user code never keeps processes running.
    let stopped = provider.stop().await;
    if let Err(e) = hooked.and(stopped) {
      return self.fail(e);
    }
    self.set_status(Status::Stopped);
    Ok(())
  }

  /// Destroys the provider; `_asked` ([`Self::ask_stop`]) is let go as this ends.
  pub async fn destroy<P: Provider>(&self, provider: &P, _asked: StopAsked) -> Result<()> {
    let _turn = self.transition.lock().await;
    match self.status() {
      Status::Destroyed => return Ok(()),
      Status::Pending => {
        // Still pending if it fails: a later destroy() tries again.
        provider.destroy_unstarted().await?;
        self.set_status(Status::Destroyed);
        return Ok(());
      }
      _ => {}
    }
    self.set_status(Status::Destroying);
    let hooked = self
      .run_hook(self.hooks().on_destroy, (), "onDestroy")
      .await;
    // A failing hook still destroys the provider: user code never keeps processes running.
    if let Err(e) = provider.destroy().await {
      // Not destroyed: a later destroy() tries again. The hook's error, if any, comes first.
      if hooked.is_err() {
        tracing::warn!(error = %e, "destroying the provider failed after its onDestroy hook failed");
      }
      return self.fail(hooked.err().unwrap_or(e));
    }
    // Hooks may hold JavaScript functions; a destroyed provider never calls them again.
    *self.hooks.locked() = Hooks::default();
    self.set_status(Status::Destroyed);
    // Destroyed all the same: the hook's failure is reported, not a reason to keep anything.
    hooked
  }

  /// Starts the provider if needed, for a call made at `called`. During teardown it lets
  /// calls through so that hooks and teardown itself can still list and kill processes.
  pub async fn ensure_running<P: Provider>(
    &self,
    provider: &P,
    on_start: OnStart,
    called: Called,
  ) -> Result<()> {
    match self.status() {
      Status::Running | Status::Stopping | Status::Destroying => return Ok(()),
      Status::Destroyed => return Err(CoreError::NotReady(self.id.clone())),
      _ => {}
    }
    self.start_with(provider, on_start, called).await?;
    if self.status() == Status::Running {
      Ok(())
    } else {
      Err(CoreError::NotReady(self.id.clone()))
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  /// A provider that records its steps.
  #[derive(Default)]
  struct Recorder(Mutex<Vec<&'static str>>);

  impl Recorder {
    fn steps(&self) -> Vec<&'static str> {
      self.0.lock().unwrap().clone()
    }
  }

  impl Provider for Recorder {
    async fn start(&self) -> Result<StartOutcome> {
      self.0.lock().unwrap().push("start");
      Ok(StartOutcome::Created)
    }
    async fn stop(&self) -> Result<()> {
      self.0.lock().unwrap().push("stop");
      Ok(())
    }
    async fn destroy(&self) -> Result<()> {
      self.0.lock().unwrap().push("destroy");
      Ok(())
    }
    async fn abandon(&self) {
      self.0.lock().unwrap().push("abandon");
    }
  }

  /// A provider whose start runs its function (which looks at, or acts on, the lifecycle
  /// meanwhile).
  struct StartingWith<F>(F);

  impl<F: Fn() + Sync> Provider for StartingWith<F> {
    async fn start(&self) -> Result<StartOutcome> {
      (self.0)();
      Ok(StartOutcome::Created)
    }
    async fn stop(&self) -> Result<()> {
      Ok(())
    }
    async fn destroy(&self) -> Result<()> {
      Ok(())
    }
  }

  #[tokio::test]
  async fn a_start_in_flight_says_whether_an_on_start_hook_follows_it() {
    let hook: Option<Hook<StartOutcome>> = Some(Arc::new(|_| Box::pin(async { Ok(()) })));
    for (on_start, hook, follows) in [
      (OnStart::Run, hook.clone(), true),
      (OnStart::Skip, hook, false),
      (OnStart::Run, None, false),
    ] {
      let lifecycle = Lifecycle::new(
        "s".into(),
        Hooks {
          on_start: hook,
          ..Hooks::default()
        },
      );
      let seen = Mutex::new(Vec::new());
      let provider = StartingWith(|| seen.lock().unwrap().push(lifecycle.start_runs_hook()));
      lifecycle
        .start_with(&provider, on_start, lifecycle.called_now())
        .await
        .unwrap();
      assert_eq!(*seen.lock().unwrap(), [follows], "{on_start:?}");
      // None is in flight once it is done.
      assert!(!lifecycle.start_runs_hook());
    }
  }

  #[tokio::test]
  async fn once_its_host_is_gone_a_lifecycle_stays_destroyed_and_calls_no_hook() {
    let called = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = called.clone();
    let lifecycle = Lifecycle::new(
      "s".into(),
      Hooks {
        on_start: Some(Arc::new(move |_| {
          seen.store(true, Ordering::SeqCst);
          Box::pin(async { Ok(()) })
        })),
        ..Hooks::default()
      },
    );
    // The start in flight when the host went away ends without making it `running`.
    let provider = StartingWith(|| lifecycle.host_gone());
    let _ = lifecycle.start(&provider, lifecycle.called_now()).await;
    assert_eq!(lifecycle.status(), Status::Destroyed);
    assert!(
      !called.load(Ordering::SeqCst),
      "onStart ran for a host that is gone"
    );
    assert!(matches!(
      lifecycle
        .ensure_running(&provider, OnStart::Run, lifecycle.called_now())
        .await,
      Err(CoreError::NotReady(_))
    ));
    lifecycle.lost(&CoreError::Destroyed);
    assert_eq!(lifecycle.status(), Status::Destroyed);
  }

  fn failing<A: 'static>() -> Option<Hook<A>> {
    Some(Arc::new(|_| Box::pin(async { Err("boom".to_owned()) })))
  }

  #[tokio::test]
  async fn a_failing_hook_still_stops_or_destroys_the_provider() {
    let provider = Recorder::default();
    let hooks = Hooks {
      on_start: None,
      on_stop: failing(),
      on_destroy: failing(),
    };
    let lifecycle = Lifecycle::new("s".into(), hooks);
    lifecycle
      .start(&provider, lifecycle.called_now())
      .await
      .unwrap();
    let stopped = lifecycle.stop(&provider, lifecycle.ask_stop()).await;
    assert!(matches!(
      stopped,
      Err(CoreError::HookFailed { hook: "onStop", .. })
    ));
    assert_eq!(lifecycle.status(), Status::Error);
    let destroyed = lifecycle.destroy(&provider, lifecycle.ask_stop()).await;
    assert!(matches!(
      destroyed,
      Err(CoreError::HookFailed {
        hook: "onDestroy",
        ..
      })
    ));
    // Destroyed all the same, and a later destroy has nothing left to do.
    assert_eq!(lifecycle.status(), Status::Destroyed);
    assert!(
      lifecycle
        .destroy(&provider, lifecycle.ask_stop())
        .await
        .is_ok()
    );
    assert_eq!(provider.steps(), ["start", "stop", "destroy"]);
  }

  #[tokio::test]
  async fn a_failing_on_start_abandons_the_start() {
    let provider = Recorder::default();
    let hooks = Hooks {
      on_start: failing(),
      ..Hooks::default()
    };
    let lifecycle = Lifecycle::new("s".into(), hooks);
    let started = lifecycle.start(&provider, lifecycle.called_now()).await;
    assert!(matches!(
      started,
      Err(CoreError::HookFailed {
        hook: "onStart",
        ..
      })
    ));
    assert_eq!(lifecycle.status(), Status::Error);
    assert_eq!(
      lifecycle.error().as_deref(),
      Some("Sandbox 's' onStart hook failed: boom")
    );
    assert_eq!(provider.steps(), ["start", "abandon"]);
  }

  #[tokio::test]
  async fn a_start_told_to_skip_on_start_does_not_call_it_and_the_next_one_does() {
    let provider = Recorder::default();
    let calls = Arc::new(Mutex::new(0));
    let counted = calls.clone();
    let hooks = Hooks {
      on_start: Some(Arc::new(move |_| {
        *counted.lock().unwrap() += 1;
        Box::pin(async { Ok(()) })
      })),
      ..Hooks::default()
    };
    let lifecycle = Lifecycle::new("s".into(), hooks);
    lifecycle
      .ensure_running(&provider, OnStart::Skip, lifecycle.called_now())
      .await
      .unwrap();
    assert_eq!(*calls.lock().unwrap(), 0);
    assert_eq!(lifecycle.status(), Status::Running);
    lifecycle
      .stop(&provider, lifecycle.ask_stop())
      .await
      .unwrap();
    lifecycle
      .start(&provider, lifecycle.called_now())
      .await
      .unwrap();
    assert_eq!(*calls.lock().unwrap(), 1);
    assert_eq!(provider.steps(), ["start", "stop", "start"]);
  }

  #[tokio::test]
  async fn a_call_made_before_a_stop_starts_nothing_after_it_and_one_made_after_does() {
    let provider = Recorder::default();
    let lifecycle = Lifecycle::new("s".into(), Hooks::default());
    let before = lifecycle.called_now();
    // The stop is asked for before the earlier call's start gets its turn, and runs first.
    lifecycle
      .stop(&provider, lifecycle.ask_stop())
      .await
      .unwrap();
    for refused in [
      lifecycle.start(&provider, before).await.map(|_| ()),
      lifecycle
        .ensure_running(&provider, OnStart::Run, before)
        .await,
    ] {
      assert!(
        matches!(refused, Err(CoreError::NotReady(_))),
        "{refused:?}"
      );
    }
    assert_eq!(lifecycle.status(), Status::Stopped);
    assert!(!lifecycle.runs_for(before));
    let after = lifecycle.called_now();
    assert!(lifecycle.starts_for(after) && lifecycle.runs_for(after));
    lifecycle.start(&provider, after).await.unwrap();
    assert_eq!(lifecycle.status(), Status::Running);
    assert_eq!(provider.steps(), ["stop", "start"]);
  }

  #[tokio::test]
  async fn a_call_made_while_a_stop_is_under_way_uses_what_runs_but_starts_nothing_after_it() {
    let lifecycle = Lifecycle::new("s".into(), Hooks::default());
    let provider = Recorder::default();
    lifecycle
      .start(&provider, lifecycle.called_now())
      .await
      .unwrap();
    let asked = lifecycle.ask_stop();
    let during = lifecycle.called_now();
    // An `onStop` hook's command, say: it runs on what the stop has not ended yet.
    assert!(lifecycle.runs_for(during));
    assert!(!lifecycle.starts_for(during));
    lifecycle.stop(&provider, asked).await.unwrap();
    assert!(!lifecycle.runs_for(during));
    assert!(matches!(
      lifecycle.start(&provider, during).await,
      Err(CoreError::NotReady(_))
    ));
    assert_eq!(lifecycle.status(), Status::Stopped);
  }

  #[tokio::test]
  async fn a_stop_dropped_before_it_ran_still_settles() {
    let lifecycle = Lifecycle::new("s".into(), Hooks::default());
    drop(lifecycle.ask_stop());
    let after = lifecycle.called_now();
    assert!(lifecycle.starts_for(after));
    lifecycle.start(&Recorder::default(), after).await.unwrap();
  }

  #[tokio::test]
  async fn a_stop_settles_once_its_host_lets_go_of_it_too() {
    let provider = Recorder::default();
    let lifecycle = Lifecycle::new("s".into(), Hooks::default());
    let before = lifecycle.called_now();
    let asked = lifecycle.ask_stop();
    // The host's own part of the stop (its unmounting) follows the transition.
    let hosts = asked.clone();
    lifecycle.stop(&provider, asked).await.unwrap();
    let during = lifecycle.called_now();
    assert_eq!(during, before, "settled before the host's part was done");
    drop(hosts);
    let after = lifecycle.called_now();
    assert!(!lifecycle.starts_for(during) && !lifecycle.runs_for(during));
    assert!(lifecycle.starts_for(after) && lifecycle.runs_for(after));
  }
}
