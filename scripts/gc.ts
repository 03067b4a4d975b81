/**
 * npm run gc -- [--dry-run] [target options]: releases allocations whose EIP (or gateway pod) no longer exists,
 * reserves the live gateway pods' own addresses, and prints the report. The same collection runs on a schedule in
 * AWS (functions/gc).
 */
import { parseArgs } from 'node:util';
import { kubeConfigOfConfig } from '../local/kubeconfig.js';
import { buildDeps } from '../shared/adapters/live.js';
import { collectGarbage, isGarbageCollector } from '../shared/core/gc.js';
import { jsonLogger, levelFromEnv } from '../shared/observability/log.js';
import { resolveTarget, TARGET_OPTIONS, TARGET_USAGE, TargetError } from './target.js';

const USAGE = `usage: npm run gc -- [options]

Releases IPAM allocations whose owner (an IptablesEIP uid, or a NAT gateway pod) no longer exists, reserves each
live NAT gateway pod's own address for the pod, and prints a report: what was scanned, the orphans found, what was
released, the gateway pod reservations, and subnet utilisation. Safe to run at any time: allocations made after
the live set was read, or whose owner a second read still finds, are left alone; an address an EIP holds is never
taken for a pod.

options:
  --dry-run                  report only; release and reserve nothing
${TARGET_USAGE}
  -h, --help                 show this help`;

async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({
      options: { ...TARGET_OPTIONS, 'dry-run': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (e) {
    process.stderr.write(`gc: ${(e as Error).message}\n\n${USAGE}\n`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  let target: ReturnType<typeof resolveTarget>;
  try {
    target = resolveTarget(values);
  } catch (e) {
    if (!(e instanceof TargetError)) throw e;
    process.stderr.write(`gc: ${e.message}\n\n${USAGE}\n`);
    process.exit(2);
  }
  if (!target) {
    process.stderr.write(`gc: no cluster and table configured, and no local stack running\n\n${USAGE}\n`);
    process.exit(2);
  }
  process.stderr.write(`gc: ${values['dry-run'] ? 'dry run against' : 'collecting in'} ${target.where}\n`);
  // Logs on stderr; the report alone on stdout.
  const log = jsonLogger({
    level: levelFromEnv(process.env.LOG_LEVEL),
    write: (l) => process.stderr.write(`${l}\n`),
  });
  const deps = buildDeps(target.config, { log, kubeConfig: kubeConfigOfConfig(target.config) });
  if (!isGarbageCollector(deps.ipam)) throw new Error('the configured IPAM cannot collect garbage');
  const report = await collectGarbage(deps, deps.ipam, { dryRun: !!values['dry-run'] });
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`gc: ${(e as Error).message}\n`);
  process.exit(1);
});
