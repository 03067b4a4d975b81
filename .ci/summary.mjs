// Reads vitest's JSON report and prints the closing line CI reads: "N passed, N failed".
// The static checks (typecheck, lint) count as one test each. A missing or unreadable report, or a
// non-zero vitest exit with no failed test in the report, counts as a failure too.
// Each failed test is named again just above that line, with the first line of its error, so that
// the tail of a long log (all a CI record may keep) says what failed, not only how many.
import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';

const [file, checksPassed = '0', checksFailed = '0', vitestRc = '1'] = process.argv.slice(2);
let passed = Number(checksPassed);
let failed = Number(checksFailed);
let skipped = 0;
if (file && existsSync(file)) {
  const report = JSON.parse(readFileSync(file, 'utf8'));
  passed += report.numPassedTests ?? 0;
  failed += report.numFailedTests ?? 0;
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  // Suites that failed to load (syntax error, missing import) have no tests but must not pass silently.
  const failures = [];
  for (const suite of report.testResults ?? []) {
    for (const test of suite.assertionResults ?? []) {
      if (test.status !== 'failed') continue;
      const message = String(test.failureMessages?.[0] ?? '')
        .split('\n')[0]
        .slice(0, 300);
      failures.push(`FAILED ${relative(process.cwd(), suite.name)} > ${test.fullName}\n       ${message}`);
    }
    if (suite.status === 'failed' && (suite.assertionResults ?? []).length === 0) {
      failed += 1;
      console.log(`suite failed to run: ${suite.name}: ${String(suite.message ?? '').split('\n')[0]}`);
    }
  }
  for (const line of failures) console.log(line);
  if (Number(vitestRc) !== 0 && (report.numFailedTests ?? 0) === 0 && failed === Number(checksFailed))
    failed += 1;
} else {
  console.log(`no vitest report at ${file}`);
  failed += 1;
}
if (skipped) console.log(`${skipped} skipped (each prints its reason above)`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
