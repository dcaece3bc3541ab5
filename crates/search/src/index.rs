//! The BM25 index: a vocabulary, each term's postings (document, term frequency) and
//! each document's length — never its text. Scores are `@mastra/core`'s, computed in the
//! same order of floating-point operations:
//! `idf = ln((N − df + 0.5) / (df + 0.5) + 1)`,
//! `idf · tf·(k1 + 1) / (tf + k1·(1 − b + b·len/avgLen))`, summed over the query's terms
//! (a repeated term counts again). Equal scores keep Mastra's order: documents first met
//! through the query's first term come first, and among those met through one term, the
//! one added earlier (a document added again counts as added last).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::tokenize::Tokenizer;

/// A document's distinct terms (side by side in one string) with how often each occurs,
/// and its length in terms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TermCounts {
  text: String,
  /// (start in `text`, byte length, frequency).
  terms: Vec<(u32, u32, u32)>,
  pub length: u32,
}

impl TermCounts {
  /// The terms of `text` as `tokenizer` makes them, counted.
  pub fn of(tokenizer: &Tokenizer, text: &str) -> TermCounts {
    let lowered = tokenizer.lower(text);
    // About one distinct term per 16 bytes of text: few tables grown on the way.
    let mut counts: FxHashMap<&str, u32> =
      FxHashMap::with_capacity_and_hasher(lowered.len() / 16, Default::default());
    let mut length = 0u32;
    tokenizer.terms_of_lowered(&lowered, |term| {
      length = length.saturating_add(1);
      *counts.entry(term).or_insert(0) += 1;
    });
    let mut out = TermCounts {
      text: String::with_capacity(counts.keys().map(|t| t.len()).sum()),
      terms: Vec::with_capacity(counts.len()),
      length,
    };
    for (term, tf) in counts {
      out
        .terms
        .push((out.text.len() as u32, term.len() as u32, tf));
      out.text.push_str(term);
    }
    out
  }

  /// The distinct terms and their frequencies.
  pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> + '_ {
    self
      .terms
      .iter()
      .map(|&(at, len, tf)| (&self.text[at as usize..(at + len) as usize], tf))
  }
}

/// A document holding a term, and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posting {
  pub doc: u32,
  pub tf: u32,
}

struct Doc<S> {
  id: Arc<str>,
  length: u32,
  /// Its terms (to remove it); `None` until first needed for a document taken from postings.
  terms: Option<Box<[u32]>>,
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
  vocabulary: FxHashMap<Box<str>, u32>,
  document_frequency: Vec<u32>,
  postings: Vec<Vec<Posting>>,
  docs: Vec<Doc<S>>,
  by_id: FxHashMap<Arc<str>, u32>,
  live: u32,
  total_length: u64,
}

impl<S: Clone> Bm25<S> {
  pub fn new(k1: f64, b: f64) -> Self {
    Bm25 {
      k1,
      b,
      vocabulary: FxHashMap::default(),
      document_frequency: Vec::new(),
      postings: Vec::new(),
      docs: Vec::new(),
      by_id: FxHashMap::default(),
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
      .iter()
      .map(|(term, tf)| (self.intern(term), tf))
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
      terms: Some(terms.iter().map(|&(t, _)| t).collect()),
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
    self.fill_doc_terms();
    let entry = &mut self.docs[doc as usize];
    entry.alive = false;
    for &t in entry.terms.iter().flatten() {
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

  /// Gives every document its term list, from the postings (one pass), if one lacks it.
  fn fill_doc_terms(&mut self) {
    if self.docs.iter().all(|d| d.terms.is_some()) {
      return;
    }
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); self.docs.len()];
    for (t, list) in self.postings.iter().enumerate() {
      for p in list {
        lists[p.doc as usize].push(t as u32);
      }
    }
    for (doc, list) in self.docs.iter_mut().zip(lists) {
      doc.terms.get_or_insert_with(|| list.into_boxed_slice());
    }
  }

  /// An index of documents `(id, length, source)` (numbered in order) and each term's
  /// postings (`postings[t]` for `terms[t]`, documents in increasing order).
  pub fn from_postings(
    k1: f64,
    b: f64,
    terms: Vec<Box<str>>,
    docs: Vec<(Arc<str>, u32, S)>,
    postings: Vec<Vec<Posting>>,
  ) -> Self {
    let mut index = Bm25::new(k1, b);
    index.document_frequency = postings.iter().map(|p| p.len() as u32).collect();
    index.vocabulary = terms
      .into_iter()
      .enumerate()
      .map(|(t, term)| (term, t as u32))
      .collect();
    index.postings = postings;
    for (number, (id, length, source)) in docs.into_iter().enumerate() {
      index.by_id.insert(id.clone(), number as u32);
      index.total_length += u64::from(length);
      index.docs.push(Doc {
        id,
        length,
        terms: None,
        alive: true,
        source,
      });
    }
    index.live = index.docs.len() as u32;
    index
  }

  /// Drops removed documents and their postings, keeping the order of the others; terms
  /// no document holds any more leave the vocabulary.
  fn compact(&mut self) {
    self.fill_doc_terms();
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
        for term in doc.terms.iter_mut().flatten() {
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
    let mut scores: FxHashMap<u32, (f64, u32)> = FxHashMap::default();
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

  /// The vocabulary, by term id.
  pub fn terms(&self) -> Vec<&str> {
    let mut terms = vec![""; self.postings.len()];
    for (term, &t) in &self.vocabulary {
      terms[t as usize] = term;
    }
    terms
  }

  /// Each term's postings, by term id (removed documents included: see `documents`).
  pub fn postings(&self) -> &[Vec<Posting>] {
    &self.postings
  }

  /// The documents by number, in the order they were added: id, length, source, whether
  /// it is still in the index.
  pub fn documents(&self) -> impl Iterator<Item = (&Arc<str>, u32, &S, bool)> + '_ {
    self
      .docs
      .iter()
      .map(|d| (&d.id, d.length, &d.source, d.alive))
  }
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

/// What is kept with a document to give its text back.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
  Inline(Arc<str>),
  File {
    path: Arc<str>,
    /// `None` for a file indexed whole.
    chunk: Option<u32>,
    start_line: u32,
    hash: u64,
  },
}

#[cfg(test)]
mod tests {
  use super::*;

  fn counts(text: &str) -> TermCounts {
    TermCounts::of(&Tokenizer::default(), text)
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
  fn an_index_from_postings_scores_and_removes_as_one_built_by_adding() {
    let docs = [("a", "fox fox dog"), ("x", "gone"), ("b", "cat fox")];
    let mut built = index(&docs);
    let terms: Vec<Box<str>> = built.terms().into_iter().map(Into::into).collect();
    let listed: Vec<(Arc<str>, u32, ())> = built
      .documents()
      .map(|(id, length, _, _)| (id.clone(), length, ()))
      .collect();
    let mut restored = Bm25::from_postings(1.5, 0.75, terms, listed, built.postings().to_vec());
    for query in ["fox", "gone cat", "dog fox"] {
      assert_eq!(
        restored.search(&q(query), 10.0, 0.0),
        built.search(&q(query), 10.0, 0.0)
      );
    }
    restored.remove("x");
    built.remove("x");
    assert_eq!(
      restored.search(&q("gone fox"), 10.0, 0.0),
      built.search(&q("gone fox"), 10.0, 0.0)
    );
  }
}
