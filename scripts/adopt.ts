/**
 * npm run adopt -- [--dry-run] [--json] [target options]: imports the IptablesEIPs kube-ovn's own controller already
 * made Ready into this product's IPAM (owner = uid, same address, placement recorded), without touching any gateway,
 * so that the handlers take them over without re-allocating or re-running anything. See scripts/adoption.ts and
 * docs/adr/0031.
 */
import { parseArgs } from 'node:util';
import { jsonLogger, levelFromEnv } from '../shared/observability/log.js';
import { adoptEips, type EipAdoption } from './adoption.js';
import { resolveTarget, TARGET_OPTIONS, TARGET_USAGE, TargetError } from './target.js';

const USAGE = `usage: npm run adopt -- [options]

Imports the IptablesEIPs that kube-ovn's own controller already configured (status.ready with a status.ip) into
eip-lambdas' IPAM: the address is claimed for the EIP's uid exactly as it is, its placement (gateway = spec.natGwDp,
prefix of the external subnet) is recorded, and status.redo is set to this product's token for the gateway pod, so the
first update neither re-allocates nor re-runs nat-gateway.sh. No gateway is changed. Gateway pods' own addresses are
reserved for the pods. Safe to run again: what is already imported is reported as "already".

Run it after kube-ovn's EIP workers are off and before the bridge starts (docs/deploy-eks.md).

options:
  --dry-run                  report what would be imported; write nothing
  --json                     print the report as JSON (default: one line per EIP)
${TARGET_USAGE}
  -h, --help                 show this help

exit status: 0 everything Ready was imported (or already was), 1 some EIP is in conflict or failed (the report
says which and why) or the run failed, 2 bad usage.`;

function usage(message: string): never {
  process.stderr.write(`adopt: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function line(a: EipAdoption): string {
  const where = a.address
    ? ` ${a.address}${a.prefix ? `/${a.prefix}` : ''}${a.gateway ? ` on ${a.gateway}` : ''}`
    : '';
  const redo = a.redo ? ` redo=${a.redo}` : '';
  return `${a.status.padEnd(8)} ${a.eip}${where}${redo}${a.reason ? ` — ${a.reason}` : ''}`;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a command-line tool's main (flags, target, report, exit status) in one readable sequence, covered end to end by test/e2e
async function main(): Promise<number> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  let values: Record<string, unknown>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      allowPositionals: true,
      options: {
        ...TARGET_OPTIONS,
        'dry-run': { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    usage((e as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (positionals.length) usage(`unexpected arguments: ${positionals.join(' ')}`);
  let target: ReturnType<typeof resolveTarget>;
  try {
    target = resolveTarget(values);
  } catch (e) {
    if (e instanceof TargetError) usage(e.message);
    throw e;
  }
  if (!target)
    usage('no cluster and table configured, and no local stack running (start one with npm start)');

  const dryRun = !!values['dry-run'];
  const err = (s: string): void => void process.stderr.write(`${s}\n`);
  err(`adopt: ${dryRun ? 'dry run against' : 'importing from'} ${target.where}`);
  const log = jsonLogger({ level: levelFromEnv(process.env.LOG_LEVEL ?? 'warn'), write: err });
  const { buildDeps } = await import('../shared/adapters/live.js');
  const { kubeConfigOfConfig } = await import('../local/kubeconfig.js');
  const deps = buildDeps(target.config, { log, kubeConfig: kubeConfigOfConfig(target.config) });
  // One line per EIP as it is done (on stderr with --json, where stdout carries only the report).
  const report = await adoptEips(deps, {
    dryRun,
    onProgress: values.json
      ? (a) => err(`adopt: ${a.eip} ${a.status}`)
      : (a) => process.stdout.write(`${line(a)}\n`),
  });
  if (values.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    const verb = dryRun ? 'would import' : 'imported';
    for (const p of report.gatewayPods)
      process.stdout.write(
        `${p.status.padEnd(8)} gateway pod ${p.pod} ${p.address} (${p.subnet})${p.reason ? ` — ${p.reason}` : ''}\n`,
      );
    const c = report.counts;
    process.stdout.write(
      `${dryRun ? 'dry run: ' : ''}${c.adopted} ${verb}, ${c.already} already imported, ${c.skipped} skipped, ` +
        `${c.conflict} in conflict, ${c.failed} failed; no gateway was changed\n`,
    );
  }
  const podConflicts = report.gatewayPods.filter((p) => p.status === 'conflict').length;
  return report.counts.conflict + report.counts.failed + podConflicts > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`adopt: ${(e as Error).message}\n`);
    process.exit(1);
  },
);
