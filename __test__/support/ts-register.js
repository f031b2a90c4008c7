'use strict'
// `node -r ./ts-register.js app.ts`: runs a TypeScript test application as tsc would compile it with Nest's
// settings (experimentalDecorators, emitDecoratorMetadata, CommonJS), without type-checking (the type tests do that).

const fs = require('node:fs')
const ts = require('typescript')

const compilerOptions = {
  module: ts.ModuleKind.CommonJS,
  target: ts.ScriptTarget.ES2022,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
}

require.extensions['.ts'] = (module, file) => {
  const { outputText } = ts.transpileModule(fs.readFileSync(file, 'utf8'), { compilerOptions, fileName: file })
  module._compile(outputText, file)
}
