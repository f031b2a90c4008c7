'use strict'
// The code blocks of the docs (README.md and docs/*.md), for the tests that check them: every ```js and ```ts block,
// with the mark on the line before it: `<!-- fragment -->`, a piece of something larger, not type-checked;
// `<!-- run: name -->`, also run by __test__/docs/run.test.js, which checks what it does under that name; both,
// `<!-- fragment, run: name -->`.

const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const pages = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]

/** The blocks of `page`: `{ page, line, code, fragment, run }` (`run` the name of a run mark, else undefined). */
function blocks(page) {
  const lines = fs.readFileSync(path.join(root, page), 'utf8').split('\n')
  const found = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(js|ts)\s*$/.test(lines[i])) continue
    const end = lines.indexOf('```', i + 1)
    const mark = /^<!-- (fragment)?(?:, )?(?:run: ([\w-]+))? -->$/.exec(lines[i - 1]?.trim() ?? '') ?? []
    found.push({ page, line: i + 1, code: lines.slice(i + 1, end).join('\n'), fragment: Boolean(mark[1]), run: mark[2] })
    i = end
  }
  return found
}

/**
 * The module system `code` loads in as written: 'commonjs' when it calls `require`, else 'module' (its `import`
 * declarations, or a snippet with neither). Throws when it has both: then it loads in neither (`require is not
 * defined` in an ES module, `Cannot use import statement outside a module` in CommonJS).
 */
function moduleSystem(code) {
  const requires = /\brequire\(/.test(code)
  if (requires && /^import\s/m.test(code)) throw new Error('it mixes require() and import declarations: it loads in no module system')
  return requires ? 'commonjs' : 'module'
}

/** `code` as an ES module, for its types: `require('x')` of a package as its import. */
function asModule(code) {
  return `${code
    .replace(/^const (\{[^}]*\}) = require\(('[^']+')\)/gm, (_, names, from) => `import ${names.replace(/:\s*/g, ' as ')} from ${from}`)
    .replace(/^const (\w+) = require\(('[^']+')\)/gm, 'import $1 from $2')}\nexport {}\n`
}

module.exports = { root, pages, blocks, moduleSystem, asModule }
