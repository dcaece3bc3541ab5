import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.{mjs,ts}'],
    // Liveness and process-tree tests spawn real processes: run files one at a time so
    // that "no process left" assertions see only their own processes.
    pool: 'forks',
    fileParallelism: false,
    reporters: ['default', ['json', { outputFile: process.env.VITEST_REPORT ?? 'target/vitest-report.json' }]],
    // Stops the Docker Engines the run started, once it ends.
    globalSetup: ['__test__/global-setup.mjs'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
})
