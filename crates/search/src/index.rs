//! The BM25 index: a vocabulary, each term's postings (document, term frequency) and
//! each document's length — never its text. Scores are `@mastra/core`'s, computed in the
//! same order of floating-point operations:
//! `idf = ln((N − df + 0.5) / (df + 0.5) + 1)`,
//! `idf · tf·(k1 + 1) / (tf + k1·(1 − b + b·len/avgLen))`, summed over the query's terms
//! (a repeated term counts again). Equal scores keep Mastra's order: documents first met
//! through the query's first term come first, and among those met through one term, the
//! one added earlier (a document added again counts as added last).

use std::collections::HashMap;
use std::sync::Arc;

/// A document's terms and how often each occurs, and its length in terms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TermCounts {
  pub counts: Vec<(Box<str>, u32)>,
  pub length: u32,
}

impl TermCounts {
  /// Counts the terms `each` gives.
  pub fn collect(each: impl FnOnce(&mut dyn FnMut(&str))) -> TermCounts {
    let mut counts: HashMap<Box<str>, u32> = HashMap::new();
    let mut length = 0u32;
    each(&mut |term: &str| {
      length = length.saturating_add(1);
      match counts.get_mut(term) {
        Some(n) => *n += 1,
        None => {
          counts.insert(term.into(), 1);
        }
      }
    });
    TermCounts {
      counts: counts.into_iter().collect(),
      length,
    }
  }
}

#[derive(Clone, Copy, Debug)]
struct Posting {
  doc: u32,
  tf: u32,
}

struct Doc<S> {
  id: Arc<str>,
  length: u32,
  terms: Box<[u32]>,
  alive: bool,
  source: S,
}

/// A hit of a search: the document's id, what was stored with it, its score.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<S> {
  pub id: Arc<str>,
  pub source: S,
  pub score: f64,
}

/// The index; `S` is what is kept with each document to find its text again.
pub struct Bm25<S> {
  pub k1: f64,
  pub b: f64,
  vocabulary: HashMap<Box<str>, u32>,
  document_frequency: Vec<u32>,
  postings: Vec<Vec<Posting>>,
  docs: Vec<Doc<S>>,
  by_id: HashMap<Arc<str>, u32>,
  live: u32,
  total_length: u64,
}

impl<S: Clone> Bm25<S> {
  pub fn new(k1: f64, b: f64) -> Self {
    Bm25 {
      k1,
      b,
      vocabulary: HashMap::new(),
      document_frequency: Vec::new(),
      postings: Vec::new(),
      docs: Vec::new(),
      by_id: HashMap::new(),
      live: 0,
      total_length: 0,
    }
  }

  pub fn len(&self) -> usize {
    self.live as usize
  }

  pub fn is_empty(&self) -> bool {
    self.live == 0
  }

  pub fn vocabulary_len(&self) -> usize {
    self.vocabulary.len()
  }

  pub fn contains(&self, id: &str) -> bool {
    self.by_id.contains_key(id)
  }

  pub fn get(&self, id: &str) -> Option<&S> {
    self.by_id.get(id).map(|&d| &self.docs[d as usize].source)
  }

  /// The id of `term` in the vocabulary, added if new.
  pub fn intern(&mut self, term: &str) -> u32 {
    if let Some(&t) = self.vocabulary.get(term) {
      return t;
    }
    let t = self.postings.len() as u32;
    self.vocabulary.insert(term.into(), t);
    self.postings.push(Vec::new());
    self.document_frequency.push(0);
    t
  }

  /// Adds (or replaces) document `id`.
  pub fn add(&mut self, id: &str, terms: &TermCounts, source: S) {
    let ids: Vec<(u32, u32)> = terms
      .counts
      .iter()
      .map(|(term, tf)| (self.intern(term), *tf))
      .collect();
    self.add_interned(id, terms.length, &ids, source);
  }

  /// Adds (or replaces) document `id` of `length` terms, given as (term id, tf) pairs of
  /// distinct terms.
  pub fn add_interned(&mut self, id: &str, length: u32, terms: &[(u32, u32)], source: S) {
    self.remove(id);
    let doc = self.docs.len() as u32;
    for &(t, tf) in terms {
      self.postings[t as usize].push(Posting { doc, tf });
      self.document_frequency[t as usize] += 1;
    }
    let id: Arc<str> = id.into();
    self.docs.push(Doc {
      id: id.clone(),
      length,
      terms: terms.iter().map(|&(t, _)| t).collect(),
      alive: true,
      source,
    });
    self.by_id.insert(id, doc);
    self.live += 1;
    self.total_length += u64::from(length);
  }

  /// Removes document `id`; whether it was there. Its postings stay until enough
  /// documents are gone to make compacting worth it.
  pub fn remove(&mut self, id: &str) -> bool {
    let Some(doc) = self.by_id.remove(id) else {
      return false;
    };
    let entry = &mut self.docs[doc as usize];
    entry.alive = false;
    for &t in entry.terms.iter() {
      self.document_frequency[t as usize] -= 1;
    }
    self.live -= 1;
    self.total_length -= u64::from(entry.length);
    let dead = self.docs.len() - self.live as usize;
    if dead > 1024 && dead > self.live as usize {
      self.compact();
    }
    true
  }

  /// Removes every document whose id starts with `prefix`; their ids.
  pub fn remove_prefix(&mut self, prefix: &str) -> Vec<Arc<str>> {
    let ids: Vec<Arc<str>> = self
      .by_id
      .keys()
      .filter(|id| id.starts_with(prefix))
      .cloned()
      .collect();
    for id in &ids {
      self.remove(id);
    }
    ids
  }

  pub fn clear(&mut self) {
    *self = Bm25::new(self.k1, self.b);
  }

  /// Drops removed documents and their postings, keeping the order of the others; terms
  /// no document holds any more leave the vocabulary.
  fn compact(&mut self) {
    let mut renumbered = vec![u32::MAX; self.docs.len()];
    let mut kept = Vec::with_capacity(self.live as usize);
    for (old, doc) in std::mem::take(&mut self.docs).into_iter().enumerate() {
      if doc.alive {
        renumbered[old] = kept.len() as u32;
        kept.push(doc);
      }
    }
    self.docs = kept;
    for list in &mut self.postings {
      list.retain_mut(|p| {
        p.doc = renumbered[p.doc as usize];
        p.doc != u32::MAX
      });
    }
    for id in self.by_id.values_mut() {
      *id = renumbered[*id as usize];
    }
    // Terms without postings: renumber the rest.
    let mut term_map = vec![u32::MAX; self.postings.len()];
    let mut next = 0u32;
    for (t, list) in self.postings.iter().enumerate() {
      if !list.is_empty() {
        term_map[t] = next;
        next += 1;
      }
    }
    if (next as usize) < self.postings.len() {
      self.vocabulary.retain(|_, t| {
        *t = term_map[*t as usize];
        *t != u32::MAX
      });
      let mut t = 0;
      self.postings.retain(|_| {
        t += 1;
        term_map[t - 1] != u32::MAX
      });
      let mut t = 0;
      self.document_frequency.retain(|_| {
        t += 1;
        term_map[t - 1] != u32::MAX
      });
      for doc in &mut self.docs {
        for term in doc.terms.iter_mut() {
          *term = term_map[*term as usize];
        }
      }
    }
  }

  /// Documents matching `query_terms`, best first: those scoring at least `min_score`
  /// (NaN: none), cut as JavaScript's `slice(0, top_k)` cuts.
  pub fn search(&self, query_terms: &[String], top_k: f64, min_score: f64) -> Vec<Hit<S>> {
    if query_terms.is_empty() || self.live == 0 {
      return Vec::new();
    }
    let n = f64::from(self.live);
    let average = self.total_length as f64 / n;
    // By document: (score, order first met).
    let mut scores: HashMap<u32, (f64, u32)> = HashMap::new();
    for term in query_terms {
      let Some(&t) = self.vocabulary.get(term.as_str()) else {
        continue;
      };
      let df = f64::from(self.document_frequency[t as usize]);
      if df == 0.0 {
        continue;
      }
      let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
      for p in &self.postings[t as usize] {
        let doc = &self.docs[p.doc as usize];
        if !doc.alive {
          continue;
        }
        let tf = f64::from(p.tf);
        let normalised = 1.0 - self.b + self.b * (f64::from(doc.length) / average);
        let term_score = idf * (tf * (self.k1 + 1.0) / (tf + self.k1 * normalised));
        let met = scores.len() as u32;
        let entry = scores.entry(p.doc).or_insert((0.0, met));
        // JavaScript's `(score || 0) + termScore`.
        let before = if entry.0.is_nan() { 0.0 } else { entry.0 };
        entry.0 = before + term_score;
      }
    }
    let mut ranked: Vec<(u32, f64, u32)> = scores
      .into_iter()
      .filter(|(_, (score, _))| *score >= min_score)
      .map(|(doc, (score, met))| (doc, score, met))
      .collect();
    let keep = slice_end(top_k, ranked.len());
    let order = |a: &(u32, f64, u32), b: &(u32, f64, u32)| {
      b.1
        .partial_cmp(&a.1)
        .unwrap_or(std::cmp::Ordering::Equal)
        .then(a.2.cmp(&b.2))
    };
    if keep < ranked.len() && keep > 0 {
      ranked.select_nth_unstable_by(keep - 1, order);
      ranked.truncate(keep);
    }
    ranked.sort_by(order);
    ranked.truncate(keep);
    ranked
      .into_iter()
      .map(|(doc, score, _)| {
        let d = &self.docs[doc as usize];
        Hit {
          id: d.id.clone(),
          source: d.source.clone(),
          score,
        }
      })
      .collect()
  }

  /// The vocabulary (by term id) and the live documents in the order they were added,
  /// each with its (term id, tf) pairs: one pass over the postings.
  pub fn export(&self) -> Export<'_, S> {
    let mut terms = vec![""; self.postings.len()];
    for (term, &t) in &self.vocabulary {
      terms[t as usize] = term;
    }
    let mut pairs: Vec<Vec<(u32, u32)>> = self
      .docs
      .iter()
      .map(|d| Vec::with_capacity(d.terms.len()))
      .collect();
    for (t, list) in self.postings.iter().enumerate() {
      for p in list {
        if self.docs[p.doc as usize].alive {
          pairs[p.doc as usize].push((t as u32, p.tf));
        }
      }
    }
    let docs = self
      .docs
      .iter()
      .zip(pairs)
      .filter(|(d, _)| d.alive)
      .map(|(d, pairs)| ExportedDoc {
        id: &d.id,
        source: &d.source,
        length: d.length,
        terms: pairs,
      })
      .collect();
    Export { terms, docs }
  }
}

pub struct Export<'a, S> {
  pub terms: Vec<&'a str>,
  pub docs: Vec<ExportedDoc<'a, S>>,
}

pub struct ExportedDoc<'a, S> {
  pub id: &'a Arc<str>,
  pub source: &'a S,
  pub length: u32,
  pub terms: Vec<(u32, u32)>,
}

/// Where JavaScript's `slice(0, k)` ends on a list of `len`: a fraction truncated, a
/// negative count from the end, NaN 0.
pub fn slice_end(k: f64, len: usize) -> usize {
  if k.is_nan() {
    return 0;
  }
  let k = k.trunc();
  if k < 0.0 {
    (len as f64 + k).max(0.0) as usize
  } else {
    k.min(len as f64) as usize
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::tokenize::Tokenizer;

  fn counts(text: &str) -> TermCounts {
    let t = Tokenizer::default();
    TermCounts::collect(|emit| t.for_each(text, emit))
  }

  fn index(docs: &[(&str, &str)]) -> Bm25<()> {
    let mut index = Bm25::new(1.5, 0.75);
    for (id, text) in docs {
      index.add(id, &counts(text), ());
    }
    index
  }

  fn ids(hits: &[Hit<()>]) -> Vec<&str> {
    hits.iter().map(|h| &*h.id).collect()
  }

  fn q(text: &str) -> Vec<String> {
    Tokenizer::default().tokens(text)
  }

  #[test]
  fn scores_are_mastras_formula() {
    let index = index(&[("a", "fox fox dog"), ("b", "cat"), ("c", "fox cat cat cat")]);
    let hits = index.search(&q("fox"), 10.0, 0.0);
    assert_eq!(ids(&hits), ["a", "c"]);
    let avg = 8.0 / 3.0;
    let idf = ((3.0f64 - 2.0 + 0.5) / (2.0 + 0.5) + 1.0).ln();
    let score =
      |tf: f64, len: f64| idf * (tf * 2.5 / (tf + 1.5 * (1.0 - 0.75 + 0.75 * (len / avg))));
    assert_eq!(hits[0].score, score(2.0, 3.0));
    assert_eq!(hits[1].score, score(1.0, 4.0));
  }

  #[test]
  fn ties_keep_the_order_of_the_first_query_term_then_of_adding() {
    let mut index = index(&[("a", "cat"), ("b", "dog"), ("c", "cat"), ("d", "dog")]);
    assert_eq!(
      ids(&index.search(&q("dog cat"), 10.0, 0.0)),
      ["b", "d", "a", "c"]
    );
    // Added again: last among its equals.
    index.add("b", &counts("dog"), ());
    assert_eq!(
      ids(&index.search(&q("dog cat"), 10.0, 0.0)),
      ["d", "b", "a", "c"]
    );
  }

  #[test]
  fn top_k_and_min_score_cut_as_javascript_does() {
    let index = index(&[("a", "x1 x1"), ("b", "x1"), ("c", "x1 y1 y1 y1")]);
    let all = index.search(&q("x1"), 10.0, 0.0);
    assert_eq!(all.len(), 3);
    assert_eq!(ids(&index.search(&q("x1"), 2.0, 0.0)), ids(&all[..2]));
    assert_eq!(ids(&index.search(&q("x1"), -1.0, 0.0)), ids(&all[..2]));
    assert_eq!(ids(&index.search(&q("x1"), 1.7, 0.0)), ids(&all[..1]));
    assert!(index.search(&q("x1"), f64::NAN, 0.0).is_empty());
    assert!(index.search(&q("x1"), 10.0, f64::NAN).is_empty());
    assert_eq!(index.search(&q("x1"), 10.0, all[1].score).len(), 2);
  }

  #[test]
  fn removing_and_compacting_keep_scores_and_order() {
    let mut index = Bm25::new(1.5, 0.75);
    for i in 0..3000 {
      index.add(
        &format!("d{i}"),
        &counts(&format!("common w{} w{}", i % 7, i)),
        (),
      );
    }
    for i in 0..2500 {
      assert!(index.remove(&format!("d{i}")));
    }
    assert!(!index.remove("d0"));
    let mut fresh = Bm25::new(1.5, 0.75);
    for i in 2500..3000 {
      fresh.add(
        &format!("d{i}"),
        &counts(&format!("common w{} w{}", i % 7, i)),
        (),
      );
    }
    for query in ["common", "w3 common", "w2999 w1"] {
      assert_eq!(
        index.search(&q(query), 50.0, 0.0),
        fresh.search(&q(query), 50.0, 0.0)
      );
    }
    // Compacted once (at 1,501 removed of 3,000): the terms of those documents are gone.
    assert!(
      index.vocabulary_len() < 3000 - 1500 + 8,
      "terms of removed documents are dropped"
    );
  }

  #[test]
  fn export_gives_back_what_was_added() {
    let mut index = index(&[("a", "fox fox dog"), ("x", "gone"), ("b", "cat")]);
    index.remove("x");
    let export = index.export();
    let docs: Vec<_> = export
      .docs
      .iter()
      .map(|d| {
        let mut terms: Vec<(&str, u32)> = d
          .terms
          .iter()
          .map(|&(t, tf)| (export.terms[t as usize], tf))
          .collect();
        terms.sort();
        (d.id.to_string(), d.length, terms)
      })
      .collect();
    assert_eq!(
      docs,
      [
        ("a".to_owned(), 3, vec![("dog", 1), ("fox", 2)]),
        ("b".to_owned(), 1, vec![("cat", 1)])
      ]
    );
  }
}
