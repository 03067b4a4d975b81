/**
 * npx tsx local/dashboard/generate-cloudwatch.ts [--check]: writes infra/dashboard.yml (the CloudWatch dashboard
 * body) from the one dashboard definition, local/dashboard/definition.ts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { dashboardYaml } from './definition.js';

const USAGE = `usage: npx tsx local/dashboard/generate-cloudwatch.ts [--check]

Writes infra/dashboard.yml from local/dashboard/definition.ts.

options:
  --check      write nothing; exit 1 if infra/dashboard.yml differs from the definition
  -h, --help   show this help`;

let values: { check?: boolean; help?: boolean };
try {
  ({ values } = parseArgs({
    options: { check: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  }));
} catch (e) {
  process.stderr.write(`generate-cloudwatch: ${(e as Error).message}\n\n${USAGE}\n`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const file = join(import.meta.dirname, '../../infra/dashboard.yml');
const want = dashboardYaml();
if (values.check) {
  const same = readFileSync(file, 'utf8') === want;
  process.stdout.write(
    same
      ? 'infra/dashboard.yml matches the definition\n'
      : 'infra/dashboard.yml differs from the definition\n',
  );
  process.exit(same ? 0 : 1);
}
writeFileSync(file, want);
process.stdout.write('wrote infra/dashboard.yml\n');
