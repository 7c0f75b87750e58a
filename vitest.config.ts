import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Workers run dist/: rebuild it first when a source file is newer.
    globalSetup: ['test/setup/fresh-dist.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: end-to-end files spawn rank worker threads of their own.
    maxWorkers: 2,
  },
});
