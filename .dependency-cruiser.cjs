/**
 * The import rules (`npm run lint:deps`, part of `npm run lint` and `npm test`). Type-only imports
 * count: a cycle or a forbidden edge made of types is still a design dependency.
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle hides which module owns what; move the shared piece (a type, a constant, a helper) into a module of its own.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'server-not-to-scripts-or-tests',
      severity: 'error',
      comment: 'The server runs without scripts/ and test/ (the build compiles server/ only).',
      from: { path: '^server/' },
      to: { path: '^(scripts|test)/' },
    },
    {
      name: 'server-only-generated-types-from-sdk',
      severity: 'error',
      comment: 'The server shares the types generated from openapi/openapi.yaml with the SDK, nothing else: the SDK is a client package.',
      from: { path: '^server/' },
      to: { path: '^sdk/', pathNot: '^sdk/src/generated/' },
    },
    {
      name: 'server-generated-sdk-types-type-only',
      severity: 'error',
      comment: 'The generated file holds types: imported with `import type`, so the build never loads it.',
      from: { path: '^server/' },
      to: { path: '^sdk/src/generated/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'browser-code-stays-in-browser',
      severity: 'error',
      comment: "The chat window runs in the visitor's browser: from the server it may take types only, never code.",
      from: { path: '^server/window/browser/' },
      // The live-stream module both browser apps share (server/browser-shared) is browser code too.
      to: { path: '^server/', pathNot: '^server/(window/browser|browser-shared)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'shared-browser-code-stays-in-browser',
      severity: 'error',
      comment: 'The browser code the chat window and the dashboard share takes nothing from either, nor code from the server.',
      from: { path: '^server/browser-shared/' },
      to: { path: '^server/', pathNot: '^server/browser-shared/' },
    },
    {
      name: 'shared-browser-code-not-in-node',
      severity: 'error',
      comment: 'The shared browser code is bundled into the chat window and the dashboard; the server never runs it.',
      from: { path: '^server/', pathNot: '^server/(window/browser|dashboard/browser|browser-shared)/' },
      to: { path: '^server/browser-shared/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'browser-code-not-in-node',
      severity: 'error',
      comment: 'The browser code is bundled by scripts/build-window.ts and served as files; the server never runs it.',
      // The dashboard's browser code may take the window's markdown renderer (its own rule allows that one file only),
      // and the emails render messages with its parser (a module without imports or DOM use at load).
      from: { path: '^server/', pathNot: '^server/(window|dashboard)/browser/' },
      to: { path: '^server/window/browser/', pathNot: '^server/window/browser/markdown\\.ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'dashboard-browser-code-stays-in-browser',
      severity: 'error',
      comment:
        "The dashboard runs in a person's browser and talks to /manage/v1: from the server it may take types only (the generated API types), never code.",
      from: { path: '^server/dashboard/browser/' },
      // The chat window's markdown renderer is browser code without imports: the inbox shows messages exactly as the window does.
      to: { path: '^server/', pathNot: '^server/(dashboard/browser/|browser-shared/|window/browser/markdown\\.ts$)', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'dashboard-browser-code-not-in-node',
      severity: 'error',
      comment: 'The dashboard is bundled by scripts/build-dashboard.ts and served as files; the server never runs it.',
      from: { path: '^server/', pathNot: '^server/dashboard/browser/' },
      to: { path: '^server/dashboard/browser/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'server-not-to-dev-dependencies',
      severity: 'error',
      comment: 'A production install leaves out devDependencies: the server may use them for types only.',
      from: { path: '^server/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|\\.dist|sdk/dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.tsx', '.js', '.d.ts', '.json'],
    },
    moduleSystems: ['cjs', 'es6'],
  },
};
