//! A process tree as `/proc` shows it, for the two that end one: a supervisor, from inside
//! (its own tree), and the host, from outside (the tree of a supervisor that stopped
//! answering, see [`super::outside`]).

/// The children of `pid`, those of each of its threads.
pub fn children_of(pid: libc::pid_t) -> Vec<libc::pid_t> {
  let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
    return Vec::new();
  };
  let mut out = Vec::new();
  for task in tasks.flatten() {
    if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
      out.extend(
        list
          .split_whitespace()
          .filter_map(|p| p.parse::<libc::pid_t>().ok()),
      );
    }
  }
  out
}

/// Every descendant of `root` as `(parent, pid)`, parents before children.
pub fn descendants_of(root: libc::pid_t) -> Vec<(libc::pid_t, libc::pid_t)> {
  let mut found = Vec::new();
  let mut frontier = vec![root];
  while let Some(pid) = frontier.pop() {
    for child in children_of(pid) {
      found.push((pid, child));
      frontier.push(child);
    }
  }
  found
}

/// The state letter and parent of `pid` (fields 3 and 4 of `/proc/<pid>/stat`, after the
/// command name, which may hold spaces and parentheses); None once it is gone.
pub fn state_and_parent(pid: libc::pid_t) -> Option<(char, libc::pid_t)> {
  let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
  let mut fields = stat[stat.rfind(')')? + 2..].split(' ');
  let state = fields.next()?.chars().next()?;
  Some((state, fields.next()?.parse().ok()?))
}
