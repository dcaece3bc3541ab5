//! Turning `(command, args)` into the one shell string that `/bin/sh -c` runs.

/// Quotes one argument for a POSIX shell. Arguments made only of characters no shell
/// treats specially are left as they are, so commands stay readable in results and logs.
pub fn shell_quote(arg: &str) -> String {
  let plain = !arg.is_empty()
    && arg
      .bytes()
      .all(|b| b.is_ascii_alphanumeric() || b"._-/@:=".contains(&b));
  if plain {
    return arg.to_owned();
  }
  format!("'{}'", arg.replace('\'', r"'\''"))
}

/// The command string as it is run and reported: the command itself is never quoted
/// (it may be a whole shell script); each argument is.
pub fn join_command(command: &str, args: &[String]) -> String {
  let mut full = command.to_owned();
  for arg in args {
    full.push(' ');
    full.push_str(&shell_quote(arg));
  }
  full
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn leaves_safe_arguments_alone() {
    assert_eq!(shell_quote("a-b_c.d/e@f:g=h"), "a-b_c.d/e@f:g=h");
  }

  #[test]
  fn quotes_like_the_contract() {
    let args = ["a b", "$HOME", "it's", "*"].map(String::from);
    assert_eq!(
      join_command("echo", &args),
      r"echo 'a b' '$HOME' 'it'\''s' '*'"
    );
  }

  #[test]
  fn empty_argument_survives() {
    assert_eq!(join_command("printf", &["".into()]), "printf ''");
  }

  #[test]
  fn no_args_keeps_command_verbatim() {
    assert_eq!(join_command("echo $FOO | wc -c", &[]), "echo $FOO | wc -c");
  }
}
