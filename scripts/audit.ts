/**
 * npm run audit -- [--repair [--dry-run]] [--json] [target options]: DynamoDB allocations vs IptablesEIPs vs each
 * gateway's net1 and tc state; prints each drift and what it means; with --repair fixes what is safe and says what it
 * did. What each kind means and what repair does: docs/audit.md.
 */
import { parseArgs } from 'node:util';
import { kubeConfigOfConfig } from '../local/kubeconfig.js';
import { buildDeps } from '../shared/adapters/live.js';
import {
  type AuditReport,
  DEFAULT_ORPHAN_GRACE_MS,
  type RepairAction,
  repairDrift,
  runAudit,
} from '../shared/audit/audit.js';
import { auditDepsOf } from '../shared/audit/live.js';
import { type DriftKind, MEANING } from '../shared/audit/model.js';
import { jsonLogger, levelFromEnv } from '../shared/observability/log.js';
import { parseDuration } from './duration.js';
import { resolveTarget, TARGET_OPTIONS, TARGET_USAGE, TargetError } from './target.js';

const USAGE = `usage: npm run audit -- [options]

Compares the DynamoDB allocations, the IptablesEIPs and what each NAT gateway has configured (net1 addresses and
tc filters, read with one set of read-only execs per gateway), and prints each drift and what it means: leaked
allocation, orphan address, missing address, address on two gateways, misplaced address, status or label mismatch,
stale lease, QoS drift, unreadable gateway. Without a target it audits the running local stack (npm start).

options:
  --repair                   fix what is safe (see docs/audit.md), print what was done, then audit again
  --dry-run                  with --repair: print what would be done, change nothing
  --grace DURATION           with --repair: an orphan address is removed only once known to be this old
                             (e.g. 90s, 10m, 1h; default ${DEFAULT_ORPHAN_GRACE_MS / 1000}s: seen by two passes)
  --json                     print one JSON document instead of text
${TARGET_USAGE}
  -h, --help                 show this help

exit status: 0 no drift (after --repair: none left), 1 drift, 2 usage error, 3 the audit could not run`;

const REPAIR_TEXT: Record<string, string> = {
  redo: "repair: the core's update re-adds it on the gateway (eip-add, then QoS) and rewrites status",
  resync: "repair: the core's update rewrites labels and status from the allocation (adopting it if needed)",
  'restore-status':
    "repair: status.ip is set back to the EIP's allocation, then the core's update configures it",
  'remove-orphan':
    'repair: removed from the gateway (eip-del and QoS deletions) once older than the grace period',
  release: 'repair: released by the garbage collector once it confirms the owner is gone',
  'delete-lease': 'repair: the expired lease item is deleted',
  'strip-qos':
    "repair: the filters put on by hand are deleted (eip-<direction>-qos-del), under the EIP's lease",
};

function usage(message: string): never {
  process.stderr.write(`audit: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function printReport(r: AuditReport, out: (s: string) => void): void {
  // One pod: `gw1: 2 addresses, 2 tc filters`; a replicated gateway: each pod read (ADR 0120).
  const byGateway = new Map<string, AuditReport['gateways']>();
  for (const g of r.gateways) byGateway.set(g.gateway, [...(byGateway.get(g.gateway) ?? []), g]);
  const sizes = (g: AuditReport['gateways'][number]) => `${g.addresses} addresses, ${g.filters} tc filters`;
  const gws = [...byGateway]
    .map(([gw, pods]) =>
      pods.length === 1
        ? `${gw}: ${sizes(pods[0]!)}`
        : `${gw}: ${pods.length} pods (${pods.map((p) => `${p.pod}: ${sizes(p)}`).join(', ')})`,
    )
    .join('; ');
  const summary = `${r.eips} EIPs, ${r.allocations} allocations, ${r.leases} leases, ${byGateway.size} gateways read${gws ? ` (${gws})` : ''}`;
  if (r.drift.length === 0) {
    out(`clean: ${summary}; no drift`);
    return;
  }
  const counts = new Map<DriftKind, number>();
  for (const d of r.drift) counts.set(d.kind, (counts.get(d.kind) ?? 0) + 1);
  out(`drift: ${r.drift.length} found (${[...counts].map(([k, n]) => `${n} ${k}`).join(', ')}); ${summary}`);
  for (const d of r.drift) {
    out(`  ${d.kind}: ${d.message}`);
    out(`      means: ${MEANING[d.kind]}`);
    out(`      ${d.repair ? REPAIR_TEXT[d.repair] : 'repair: none automatic (reported only)'}`);
  }
}

function printActions(actions: RepairAction[], dry: boolean, out: (s: string) => void): void {
  if (actions.length === 0) {
    out(dry ? 'repair (dry run): nothing to do' : 'repair: nothing to do');
    return;
  }
  out(`repair${dry ? ' (dry run)' : ''}: ${actions.length} actions`);
  for (const a of actions)
    out(`  ${a.result}: ${a.action} — ${a.kind} ${a.target}${a.detail ? ` (${a.detail})` : ''}`);
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a command-line tool's main (flags, target, report, exit status) in one readable sequence, covered end to end by test/e2e
async function main(): Promise<number> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({
      options: {
        ...TARGET_OPTIONS,
        repair: { type: 'boolean' },
        'dry-run': { type: 'boolean' },
        grace: { type: 'string' },
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
  if (values['dry-run'] && !values.repair) usage('--dry-run only goes with --repair');
  if (values.grace !== undefined && !values.repair) usage('--grace only goes with --repair');
  const grace = typeof values.grace === 'string' ? parseDuration(values.grace) : DEFAULT_ORPHAN_GRACE_MS;
  if (grace === undefined) usage(`--grace must be a duration like 90s, 10m or 1h, got "${values.grace}"`);
  let target: ReturnType<typeof resolveTarget>;
  try {
    target = resolveTarget(values);
  } catch (e) {
    if (!(e instanceof TargetError)) throw e;
    usage(e.message);
  }
  if (!target)
    usage('no cluster and table configured, and no local stack running (start one with npm start)');

  const json = !!values.json;
  const dry = !!values['dry-run'];
  const err = (s: string): void => void process.stderr.write(`${s}\n`);
  const out = (s: string): void => void process.stdout.write(`${s}\n`);
  err(
    `audit: ${values.repair ? (dry ? 'repair dry run against' : 'auditing and repairing') : 'auditing'} ${target.where}`,
  );
  const log = jsonLogger({ level: levelFromEnv(process.env.LOG_LEVEL ?? 'warn'), write: err });
  const kubeConfig = kubeConfigOfConfig(target.config);
  const deps = auditDepsOf(target.config, buildDeps(target.config, { log, kubeConfig }), { kubeConfig });
  const progress = (line: string): void => err(`audit: ${line}`);

  const report = await runAudit(deps, { progress });
  if (!values.repair) {
    if (json) out(JSON.stringify({ report }, null, 2));
    else printReport(report, out);
    return report.drift.length ? 1 : 0;
  }
  if (!json) printReport(report, out);
  const actions = report.drift.length
    ? await repairDrift(deps, report, { dryRun: dry, orphanGraceMs: grace, progress })
    : [];
  if (!json) printActions(actions, dry, out);
  if (dry || report.drift.length === 0) {
    if (json) out(JSON.stringify({ report, repair: actions }, null, 2));
    return report.drift.length ? 1 : 0;
  }
  const after = await runAudit(deps, { progress });
  if (json) out(JSON.stringify({ report, repair: actions, after }, null, 2));
  else {
    out('after repair:');
    printReport(after, out);
  }
  return after.drift.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`audit: could not run: ${(e as Error).message}\n`);
    process.exit(3);
  },
);
