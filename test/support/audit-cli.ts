/**
 * `npm run audit` (scripts/audit.ts) as a user runs it against a local stack: its own process, the stack file the
 * stack wrote, a HOME of the test's own (no AWS profile or kubeconfig of whoever runs the tests leaks in).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';

const root = join(import.meta.dirname, '../..');
const tsx = join(root, 'node_modules/tsx/dist/cli.mjs');

export interface AuditRun {
  /** The exit code (-1 when killed or not started). */
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the audit with `--stack stackFile` and `args`; never rejects. */
export function auditCli(stackFile: string, home: string, ...args: string[]): Promise<AuditRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [tsx, join(root, 'scripts/audit.ts'), '--stack', stackFile, ...args],
      { cwd: root, env: { PATH: process.env.PATH ?? '', HOME: home }, timeout: 120_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}
