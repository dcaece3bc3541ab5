//! Generated output for the decoding and retention of a command's streams: any bytes cut
//! into any chunks decode to the same text as in one piece, and retention keeps exactly the
//! newest bytes (whole characters), counting what it dropped.

use native_workspace_core::process::output::{Retained, Utf8Decoder};
use proptest::prelude::*;

/// Bytes that are mostly valid UTF-8 with multi-byte characters, plus stray continuation
/// bytes, truncated sequences, overlong forms and surrogates encoded in UTF-8.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
  let piece = prop_oneof![
    any::<String>().prop_map(String::into_bytes),
    prop::collection::vec(any::<u8>(), 0..16),
    prop::sample::select(vec![
      vec![0xE2, 0x82],
      vec![0xF0, 0x9F, 0x99],
      vec![0x80],
      vec![0xC0, 0xAF],
      vec![0xED, 0xA0, 0x80],
      vec![0xF8, 0x88, 0x80, 0x80, 0x80],
      vec![0xFF, 0xFE],
      "é🙂日".as_bytes().to_vec(),
    ]),
  ];
  prop::collection::vec(piece, 0..8).prop_map(|parts| parts.concat())
}

/// Cut points into a buffer of `len` bytes, sorted.
fn cuts(len: usize, raw: &[usize]) -> Vec<usize> {
  let mut cuts: Vec<usize> = raw.iter().map(|c| c % (len + 1)).collect();
  cuts.sort_unstable();
  cuts
}

fn text() -> impl Strategy<Value = String> {
  prop_oneof![any::<String>(), "[a-z\\n]{0,30}", "[é🙂日a]{0,30}"]
}

proptest! {
  #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

  #[test]
  fn chunked_decoding_equals_decoding_in_one_piece(data in bytes(), raw in prop::collection::vec(any::<usize>(), 0..8)) {
    let whole = String::from_utf8_lossy(&data).into_owned();
    let mut decoder = Utf8Decoder::default();
    let mut text = String::new();
    let mut from = 0;
    for cut in cuts(data.len(), &raw) {
      text.push_str(&decoder.decode(&data[from..cut]));
      from = cut;
    }
    text.push_str(&decoder.decode(&data[from..]));
    text.push_str(&decoder.finish());
    prop_assert_eq!(text, whole);
  }

  #[test]
  fn retention_keeps_exactly_the_newest_bytes(pushes in prop::collection::vec(text(), 0..10), limit in 0usize..64) {
    let mut retained = Retained::new(Some(limit));
    let mut all = String::new();
    for p in &pushes {
      retained.push(p);
      all.push_str(p);
      // The newest `limit` bytes, starting at the first character boundary in them.
      let mut start = all.len().saturating_sub(limit);
      while !all.is_char_boundary(start) {
        start += 1;
      }
      prop_assert_eq!(retained.text(), &all[start..]);
      prop_assert_eq!(retained.dropped_bytes(), start as u64);
      prop_assert_eq!(retained.truncated(), start > 0);
    }
    let kept = retained.text().to_owned();
    prop_assert_eq!(retained.take(), kept);
    prop_assert_eq!(retained.text(), "");
  }

  #[test]
  fn unlimited_retention_keeps_everything(pushes in prop::collection::vec(text(), 0..10)) {
    let mut retained = Retained::new(None);
    for p in &pushes {
      retained.push(p);
    }
    prop_assert_eq!(retained.text(), pushes.concat());
    prop_assert!(!retained.truncated());
  }

  #[test]
  fn huge_limits_are_no_limit(pushes in prop::collection::vec(text(), 0..6), limit in prop_oneof![Just(usize::MAX), Just(usize::MAX / 2), (usize::MAX - 100)..=usize::MAX]) {
    let mut retained = Retained::new(Some(limit));
    for p in &pushes {
      retained.push(p);
    }
    prop_assert_eq!(retained.text(), pushes.concat());
    prop_assert_eq!(retained.dropped_bytes(), 0);
  }
}

/// The smallest case of the property above: the newest two bytes of "aéb" are the end of
/// 'é' and 'b', so only "b" is whole; the "a" before 'é' is not part of them.
#[test]
fn a_character_cut_at_the_edge_does_not_join_older_text() {
  let mut retained = Retained::new(Some(2));
  retained.push("a");
  retained.push("éb");
  assert_eq!(retained.text(), "b");
  assert_eq!(retained.dropped_bytes(), 3);
}
