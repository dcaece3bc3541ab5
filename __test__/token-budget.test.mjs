// The token budget of tool output must cut exactly where @mastra/core cuts: compared on
// mixed text (accents, CJK, emoji, punctuation runs, numbers, whitespace) against
// Mastra's own estimator and slicer, loaded from its build in the same run.
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import native from '../index.js'

const require = createRequire(import.meta.url)
const dist = join(require.resolve('@mastra/core/workspace'), '..', '..')
const chunk = readdirSync(dist).find(
  (f) => f.endsWith('.js') && readFileSync(join(dist, f), 'utf8').includes('function estimateTokenCount('),
)
// The chunk exports the estimator and the slicer under short names (see its export list).
const mastra = await import(join(dist, chunk))
const estimate = mastra.f
const slice = mastra.d

/** Mastra's budget: first tenth of `limit` tokens, a notice, then the rest from the end. */
function mastraSandwich(text, limit = 2000) {
  const total = estimate(text)
  if (total <= limit) return text
  const head = Math.floor(limit * 0.1)
  const tail = limit - head
  return [slice(text, 0, head), `[...output truncated — showing first ~${head} + last ~${tail} of ~${total} tokens...]`, slice(text, -tail)]
    .filter(Boolean)
    .join('\n')
}

function mixedText(seed, words) {
  const pieces = ['alpha', 'Straße', 'façade', 'žluťoučký', '日本語テキスト', '😀🚀', '--->', '...', '12345', '3.14', 'x', '\t', '  ', '\n', 'ÄÖÜ', 'very_long_identifier_name', '{}[]()', 'a😀b']
  let state = seed
  const out = []
  for (let i = 0; i < words; i++) {
    state = (state * 1103515245 + 12345) % 2147483648
    out.push(pieces[state % pieces.length], state % 3 === 0 ? ' ' : '')
  }
  return out.join('')
}

describe('token budget', () => {
  it('sanity: the Mastra primitives were found', () => {
    expect(estimate('hello, world')).toBe(3)
    expect(slice('alpha beta gamma', -1)).toBe(' gamma')
  })

  it.each([1, 2, 3, 4, 5])('matches @mastra/core on mixed text (seed %i)', (seed) => {
    const text = mixedText(seed, 6000)
    expect(native.commandResultText(text, '', 0, true, 0, undefined)).toBe(mastraSandwich(text))
    expect(native.commandResultText(text, '', 0, true, 0, 500)).toBe(mastraSandwich(text, 500))
  })

  // A run that costs a token per character (it holds CJK) and holds characters of two
  // UTF-16 units is cut by units: the part kept costs more tokens than its share.
  it.each([
    ['the head', `ž\u200b국\u200b한語ł국čžü🙂🙂${'\n'.repeat(300)}${'a'.repeat(5000)}`, 70],
    ['the tail', `🙂🙂𝄞${'a'.repeat(5000)}日`, 1854],
  ])('matches @mastra/core where %s cuts a CJK run with characters of two units', (_, text, limit) => {
    expect(native.commandResultText(text, '', 0, true, 0, limit)).toBe(mastraSandwich(text, limit))
  })
})

describe('token budget keeping the start', () => {
  it.each([1, 2, 3])('matches @mastra/core on mixed text (seed %i)', (seed) => {
    const text = mixedText(seed, 3000)
    const total = estimate(text)
    const expected = `${slice(text, 0, 700)}\n[output truncated: showing first ~700 of ~${total} tokens]`
    expect(native.limitTokensKeepStart(text, 700)).toBe(expected)
  })

  it('matches @mastra/core where it cuts a CJK run with characters of two units', () => {
    const text = `語${'a'.repeat(5000)}𐂀𰀀𐴰`
    const expected = `${slice(text, 0, 1669)}\n[output truncated: showing first ~1669 of ~${estimate(text)} tokens]`
    expect(native.limitTokensKeepStart(text, 1669)).toBe(expected)
  })
})
