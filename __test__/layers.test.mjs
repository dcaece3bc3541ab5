// No crate's top-level modules (crates/*, the binding in src/) nor lib/*.js files import
// one another in a cycle, and crates/core's modules use only the layers below their own
// (docs/architecture.md). Read from the sources by scripts/module-graph.mjs, which is first
// shown to find a cycle, and to ignore what is no dependency, in a small tree made here.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CORE_LAYERS, cycles, describeCycle, jsGraph, layerViolations, repositoryGraphs, rustGraph } from '../scripts/module-graph.mjs'

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'))
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

/** Writes `files` (relative path → text) below a fresh directory, and returns it. */
function tree(name, files) {
  const dir = path.join(scratch, name)
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true })
    fs.writeFileSync(path.join(dir, file), text)
  }
  return dir
}

/** A graph's edges as plain lists: module → the modules it uses, sorted. */
const edgeLists = (graph) => Object.fromEntries([...graph.edges].map(([from, to]) => [from, [...to.keys()].sort()]))

describe('the checker', () => {
  it('finds a cycle through three Rust modules, reached by crate::, a group, super:: from a nested file, and a re-export', () => {
    const dir = tree('crate', {
      'src/lib.rs': '//! Names crate::c in a comment.\nmod a;\nmod b;\npub mod c;\nmod d;\nmod e;\npub use d::Named;\n',
      'src/a.rs': 'use crate::b::Thing;\npub fn g() {}\n',
      'src/b.rs': 'use super::{c::Other, /* crate::e */};\npub struct Thing;\n',
      'src/c.rs': [
        'pub mod inner;',
        'pub struct Other;',
        'const S: &str = "crate::d";',
        'const R: &str = r#"crate::e "quoted" "#;',
        "const Q: char = '\"';",
        'fn f<\'a>(x: &\'a str) -> &\'a str { x }',
        '#[cfg(test)]',
        'mod tests {',
        '  use super::*;',
        '  use super::inner;',
        '}',
        '',
      ].join('\n'),
      'src/c/inner.rs': 'pub fn f() {\n  super::super::a::g();\n}\n',
      'src/d.rs': 'pub struct Named;\n',
      'src/e.rs': 'use crate::Named;\n',
    })
    const graph = rustGraph(path.join(dir, 'src', 'lib.rs'))
    expect(graph.modules).toEqual(['a', 'b', 'c', 'd', 'e'])
    expect(edgeLists(graph)).toEqual({ a: ['b'], b: ['c'], c: ['a'], d: [], e: ['d'] })
    const found = cycles(graph)
    expect(found.map((c) => c.cycle)).toEqual([['a', 'b', 'c', 'a']])
    expect(describeCycle(found[0])).toContain('c → a (')
    expect(describeCycle(found[0])).toContain(path.join('src', 'c', 'inner.rs') + ':2')
  })

  it('finds a cycle among lib/ files, through a require deferred to first use, and not through prose', () => {
    const dir = tree('lib', {
      'x.js': "'use strict'\n// see require('./z') for the other side\nconst y = require('./y')\n",
      'y.js': "function later() {\n  return require('./z.js')\n}\n",
      'z.js': ' * require(\'./y\') in a comment block\nconst { X } = require("./x")\n',
    })
    const graph = jsGraph(dir)
    expect(edgeLists(graph)).toEqual({ x: ['y'], y: ['z'], z: ['x'] })
    expect(cycles(graph).map((c) => c.cycle)).toEqual([['x', 'y', 'z', 'x']])
  })

  it('reports an edge that leads up or across the layers, and a module in no layer', () => {
    const graph = {
      modules: ['top', 'middle', 'side', 'bottom', 'stray'],
      edges: new Map([
        ['top', new Map([['bottom', 'top.rs:1']])],
        ['middle', new Map([['side', 'middle.rs:2']])],
        ['side', new Map()],
        ['bottom', new Map([['top', 'bottom.rs:3']])],
        ['stray', new Map()],
      ]),
    }
    expect(layerViolations(graph, [['top'], ['middle', 'side'], ['bottom']])).toEqual([
      'stray is in no layer',
      'middle → side (middle.rs:2) does not lead down: side is in the same layer',
      'bottom → top (bottom.rs:3) does not lead down: top is in a higher layer',
    ])
  })
})

describe('this repository', () => {
  const graphs = repositoryGraphs()
  const graph = (name) => graphs.find((g) => g.name === name).graph

  it('is read: every crate, the keeper binary and lib/, with the dependencies they have', () => {
    expect(graphs.map((g) => g.name)).toEqual(
      expect.arrayContaining(['binding (src/)', 'crates/core', 'crates/core bin native-workspace-keeper', 'crates/docker', 'crates/egress', 'lib/']),
    )
    expect([...graph('crates/core').edges.get('sandbox').keys()]).toContain('process')
    expect([...graph('crates/docker').edges.get('host').keys()]).toContain('engine')
    expect([...graph('crates/egress').edges.get('proxy').keys()]).toContain('policy')
    expect([...graph('binding (src/)').edges.get('local_sandbox').keys()]).toContain('errors')
    expect([...graph('lib/').edges.get('index').keys()]).toContain('local-sandbox')
  })

  for (const { name, graph: g } of graphs) {
    it(`${name}: no import cycle between its top-level modules`, () => {
      expect(cycles(g).map(describeCycle)).toEqual([])
    })
  }

  it('crates/core: each module uses only the layers below its own', () => {
    expect(layerViolations(graph('crates/core'), CORE_LAYERS)).toEqual([])
  })
})
