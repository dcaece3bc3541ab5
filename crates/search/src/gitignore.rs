//! A `.gitignore` file's patterns, as git reads them: `#` comments, `!` negation (the
//! last matching pattern decides), a trailing `/` for directories only, a pattern with a
//! `/` before its end anchored at the file's directory (else it matches a name at any
//! depth), `*` and `?` within one name, `[…]` classes, `**` across directories. Matching
//! is a table over pattern × path positions: time proportional to their product.

#[derive(Clone, Debug, PartialEq)]
enum Token {
  Literal(char),
  /// `?`: one character, not `/`.
  One,
  /// `*`: any run of characters without `/`.
  Star,
  /// `**` (whole component): any run of characters, `/` included.
  AnyPath,
  /// `**/` at the start or after a `/`: nothing, or whole directories.
  AnyDirs,
  Class {
    negated: bool,
    items: Vec<(char, char)>,
  },
}

#[derive(Clone, Debug)]
struct Rule {
  tokens: Vec<Token>,
  negated: bool,
  directory_only: bool,
  /// Matched against the whole path; else against the last component.
  anchored: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Gitignore {
  rules: Vec<Rule>,
}

impl Gitignore {
  pub fn parse(text: &str) -> Gitignore {
    Gitignore {
      rules: text.lines().filter_map(parse_rule).collect(),
    }
  }

  pub fn is_empty(&self) -> bool {
    self.rules.is_empty()
  }

  /// Whether `path` (relative to the file's directory, `/`-separated) is ignored. The
  /// walk asks for each directory before entering it, so a path inside an ignored
  /// directory is never asked about.
  pub fn ignores(&self, path: &str, is_dir: bool) -> bool {
    let path = path.trim_start_matches("./").trim_start_matches('/');
    if path.is_empty() {
      return false;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    let chars: Vec<char> = path.chars().collect();
    let name_chars: Vec<char> = name.chars().collect();
    let mut ignored = false;
    for rule in &self.rules {
      if rule.negated != ignored || (rule.directory_only && !is_dir) {
        continue;
      }
      let subject = if rule.anchored { &chars } else { &name_chars };
      if matches(&rule.tokens, subject) {
        ignored = !rule.negated;
      }
    }
    ignored
  }
}

fn parse_rule(line: &str) -> Option<Rule> {
  let line = line.strip_suffix('\r').unwrap_or(line);
  if line.starts_with('#') {
    return None;
  }
  // Trailing spaces go, unless escaped.
  let mut text = line.trim_end_matches(' ').to_owned();
  if text.ends_with('\\') && line.len() > text.len() {
    text.push(' ');
  }
  let (negated, text) = match text.strip_prefix('!') {
    Some(rest) => (true, rest.to_owned()),
    None => (false, text),
  };
  let text = text.strip_prefix('\\').map_or(text.clone(), |rest| {
    if rest.starts_with('#') || rest.starts_with('!') {
      rest.to_owned()
    } else {
      text.clone()
    }
  });
  let (directory_only, text) = match text.strip_suffix('/') {
    Some(rest) => (true, rest),
    None => (false, text.as_str()),
  };
  if text.is_empty() {
    return None;
  }
  let anchored = text.contains('/');
  let text = text.strip_prefix('/').unwrap_or(text);
  Some(Rule {
    tokens: tokens(text),
    negated,
    directory_only,
    anchored,
  })
}

fn tokens(pattern: &str) -> Vec<Token> {
  let chars: Vec<char> = pattern.chars().collect();
  let mut out = Vec::new();
  let mut i = 0;
  while i < chars.len() {
    let c = chars[i];
    let component_start = i == 0 || chars[i - 1] == '/';
    match c {
      '*' if chars.get(i + 1) == Some(&'*') && component_start => {
        let after = chars.get(i + 2);
        if after == Some(&'/') {
          out.push(Token::AnyDirs);
          i += 3;
        } else if after.is_none() {
          out.push(Token::AnyPath);
          i += 2;
        } else {
          out.push(Token::Star);
          i += 2;
        }
      }
      '*' => {
        out.push(Token::Star);
        i += 1;
      }
      '?' => {
        out.push(Token::One);
        i += 1;
      }
      '\\' if i + 1 < chars.len() => {
        out.push(Token::Literal(chars[i + 1]));
        i += 2;
      }
      '[' => match class(&chars[i + 1..]) {
        Some((token, used)) => {
          out.push(token);
          i += 1 + used;
        }
        None => {
          out.push(Token::Literal('['));
          i += 1;
        }
      },
      _ => {
        out.push(Token::Literal(c));
        i += 1;
      }
    }
  }
  out
}

/// A class after its `[`: the token and the characters used, `]` included.
fn class(chars: &[char]) -> Option<(Token, usize)> {
  let mut i = 0;
  let negated = matches!(chars.first(), Some('!') | Some('^'));
  if negated {
    i += 1;
  }
  let mut items = Vec::new();
  let mut first = true;
  while i < chars.len() {
    let c = chars[i];
    if c == ']' && !first {
      return Some((Token::Class { negated, items }, i + 1));
    }
    first = false;
    let c = if c == '\\' && i + 1 < chars.len() {
      i += 1;
      chars[i]
    } else {
      c
    };
    if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&e| e != ']') {
      items.push((c, chars[i + 2]));
      i += 3;
    } else {
      items.push((c, c));
      i += 1;
    }
  }
  None
}

fn matches(tokens: &[Token], text: &[char]) -> bool {
  // can[j]: tokens[..i] can match text[..j].
  let mut can = vec![false; text.len() + 1];
  can[0] = true;
  for token in tokens {
    let mut next = vec![false; text.len() + 1];
    match token {
      Token::Star | Token::AnyPath => {
        let crosses = matches!(token, Token::AnyPath);
        let mut reach = false;
        for j in 0..=text.len() {
          reach = can[j] || (reach && j > 0 && (crosses || text[j - 1] != '/'));
          next[j] = reach;
        }
      }
      Token::AnyDirs => {
        // Nothing, or any run ending with `/`.
        let mut started = false;
        for j in 0..=text.len() {
          if j > 0 && text[j - 1] == '/' && started {
            next[j] = true;
          }
          next[j] |= can[j];
          started |= can[j];
        }
      }
      _ => {
        for j in 0..text.len() {
          if can[j] && one(token, text[j]) {
            next[j + 1] = true;
          }
        }
      }
    }
    can = next;
  }
  can[text.len()]
}

fn one(token: &Token, c: char) -> bool {
  match token {
    Token::Literal(l) => *l == c,
    Token::One => c != '/',
    Token::Class { negated, items } => {
      c != '/' && items.iter().any(|&(a, b)| a <= c && c <= b) != *negated
    }
    _ => false,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn names_anywhere_anchored_paths_and_directories() {
    let g = Gitignore::parse("# comment\n*.log\n/build\ndist/\ndocs/*.tmp\n\n");
    assert!(g.ignores("a.log", false));
    assert!(g.ignores("deep/er/a.log", false));
    assert!(g.ignores("build", true));
    assert!(!g.ignores("src/build", true));
    assert!(g.ignores("dist", true));
    assert!(g.ignores("src/dist", true));
    assert!(!g.ignores("dist", false), "dist/ is for directories only");
    assert!(g.ignores("docs/x.tmp", false));
    assert!(!g.ignores("docs/sub/x.tmp", false));
    assert!(!g.ignores("readme.md", false));
    assert!(g.ignores("./a.log", false));
  }

  #[test]
  fn negation_double_star_and_classes() {
    let g = Gitignore::parse("*.md\n!keep.md\n**/cache/**\na/**/z\nf[0-9].txt\n\\#hash\n");
    assert!(g.ignores("x.md", false));
    assert!(!g.ignores("keep.md", false));
    assert!(!g.ignores("sub/keep.md", false));
    assert!(g.ignores("x/cache/y", false));
    assert!(g.ignores("cache/y/z", false));
    assert!(g.ignores("a/z", false));
    assert!(g.ignores("a/b/c/z", false));
    assert!(g.ignores("f7.txt", false));
    assert!(!g.ignores("fx.txt", false));
    assert!(g.ignores("#hash", false));
  }

  #[test]
  fn many_stars_against_a_long_name_are_a_table_not_backtracking() {
    // Exponential for a backtracking matcher; 200 × 5,000 cells here.
    let g = Gitignore::parse(&format!("{}b\n", "*a".repeat(200)));
    assert!(!g.ignores(&"a".repeat(5000), false));
    assert!(g.ignores(&format!("{}b", "a".repeat(5000)), false));
  }
}
