// ESLint for the workspace: typescript-eslint's type-checked rules, plus the house limits on
// function length and positional parameters for code that ships (libs, services, the CLI).
// Run with `npm run lint` (after `tsc -b`: tests import the built packages).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', 'coverage/**', '.bosun/**', 'test/fixtures/**', 'bench/profiles/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { project: ['./tsconfig.eslint.json', './cli/web/tsconfig.json'], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Code that ships: short functions, few positional parameters, no console (a logger is injected).
    files: ['libs/*/src/**/*.ts', 'services/*/src/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
      'max-params': ['error', 4],
      'no-console': 'error',
    },
  },
  {
    // The CLI prints to the terminal on purpose; its functions stay short too. (The bench's
    // scenarios are long scripts, measured as a whole; they are reshaped with the bench itself.)
    files: ['cli/src/**/*.ts', 'mcp-servers/*/src/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
      'max-params': ['error', 4],
    },
  },
  {
    // Tests read JSON from Redis, NATS and HTTP as it comes: `any` there is the point, not a slip.
    files: ['**/*.test.ts', 'test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // In-memory stand-ins implement async ports without awaiting anything.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // Plain JavaScript: the config itself, the bin shims, the bundler, the bench's preload scripts.
    files: ['eslint.config.js', '**/bin/*.mjs', 'scripts/*.mjs', '.dependency-cruiser.cjs', 'bench/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    // Merged with disableTypeChecked's own languageOptions, which turn the type-checked parser off.
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { process: 'readonly', URL: 'readonly', console: 'readonly', module: 'writable', require: 'readonly' },
    },
  },
);
