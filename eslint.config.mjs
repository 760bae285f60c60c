// ESLint (`npm run lint`): typescript-eslint's recommended rules on every TypeScript file, plus the
// promise rules that need type information, since an unawaited promise in a request or a worker
// loses its error. Layout and spacing are Prettier's (`npm run format`), not ESLint's.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', '.dist/', 'coverage/', 'node_modules/', 'sdk/node_modules/', 'sdk/dist/', 'sdk/src/generated/', '.bench/', 'data/', 'test-artifacts/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // Not in callbacks: Knex's `where((q) => q...)` returns its builder, a thenable, by design.
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    rules: {
      // `require` is used on purpose: modules loaded only on the path that needs them, and library internals (docs/library-patches.md).
      '@typescript-eslint/no-require-imports': 'off',
      // A leading underscore names what is left unused on purpose (a destructured field dropped, a handler's fourth argument).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      // Input filters match control characters on purpose.
      'no-control-regex': 'off',
      // Patterns over YAML and fixed-width text spell their indentation out.
      'no-regex-spaces': 'off',
      // Prettier breaks a long chain before `[method](...)`; it places every line break, so this layout rule is its business.
      'no-unexpected-multiline': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    languageOptions: { globals: globals.node },
  },
);
