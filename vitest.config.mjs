import { defineConfig } from 'vitest/config'

// How many test files run at once: one unless NATIVE_WORKSPACE_TEST_FILES_AT_ONCE says more
// (`npm test` does, for the runs whose files judge only what they made themselves).
const filesAtOnce = Math.max(1, Number(process.env.NATIVE_WORKSPACE_TEST_FILES_AT_ONCE) || 1)

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.{mjs,ts}'],
    // Each file in a process of its own: liveness and process-tree tests judge the processes
    // below their own process only, so files beside them (or other runs) do not fail them.
    pool: 'forks',
    fileParallelism: filesAtOnce > 1,
    maxWorkers: filesAtOnce,
    reporters: ['default', ['json', { outputFile: process.env.VITEST_REPORT ?? 'target/vitest-report.json' }]],
    // Stops the Docker Engines the run started, once it ends.
    globalSetup: ['__test__/global-setup.mjs'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
})
